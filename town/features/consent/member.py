"""A member as the town knows them: their platform id, the names they went by, and the
distinctive things they said; how a text that holds them is found and redacted."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from sqlalchemy import String, cast, or_
from sqlalchemy.sql.elements import ColumnElement

from town.inputs.naming import MARKER

SQL_TERMS = 100  # LIKE terms per query (SQLite caps an expression's depth at 1000)
FORGOTTEN = "forgotten visitor"
GONE = "[forgotten]"
MIN_ID = 6  # a shorter user id (a web page's made-up one) could be anyone's word
MIN_PHRASE = 12  # shorter words ("hi", "ok") are everyone's, not the member's


@dataclass(frozen=True)
class Member:
    platform: str
    user_id: str
    names: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()

    @property
    def logged_as(self) -> str:
        """The tail of the member's audit identity: ``(discord:1234)``."""
        return f"({self.platform}:{self.user_id})"

    @cached_property
    def _names(self) -> set[str]:
        """Each name as given, without the visitor marker, and unquoted."""
        names = set(self.names) | {n.removesuffix(MARKER).strip() for n in self.names}
        return {n for n in names | {n.strip('"') for n in names} if n}

    @cached_property
    def _pattern(self) -> re.Pattern[str] | None:
        longest_first = sorted(self._names, key=len, reverse=True)
        parts = [rf"(?<!\w){re.escape(n)}(?!\w)" for n in longest_first]
        parts += [re.escape(p) for p in self.phrases if len(p) >= MIN_PHRASE]
        parts.append(re.escape(self.logged_as))
        if len(self.user_id) >= MIN_ID:  # a mention of them (<@1234...>, an admin's forget)
            parts.append(rf"(?<!\w){re.escape(self.user_id)}(?!\w)")
        return re.compile("|".join(parts), re.IGNORECASE) if parts else None

    def held_in(self, text: str) -> bool:
        """Whether ``text`` names the member or quotes them."""
        return self._pattern is not None and self._pattern.search(text) is not None

    def redact(self, text: str) -> str:
        """``text`` with the member's names and words taken out."""
        if self._pattern is None:
            return text
        names = {n.casefold() for n in self._names}
        return self._pattern.sub(
            lambda m: FORGOTTEN if m.group(0).casefold() in names else GONE, text
        )

    def redact_json(self, value: Any) -> Any:
        """A JSON value with every string redacted."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self.redact_json(v) for v in value]
        if isinstance(value, dict):
            return {k: self.redact_json(v) for k, v in value.items()}
        return value

    def held_in_json(self, value: Any) -> bool:
        if isinstance(value, str):
            return self.held_in(value)
        if isinstance(value, list):
            return any(self.held_in_json(v) for v in value)
        if isinstance(value, dict):
            return any(self.held_in_json(v) for v in value.values())
        return False

    @property
    def needles(self) -> list[str]:
        """What ``held_in`` looks for, as plain text: names, phrases and the audit identity."""
        phrases = [p for p in self.phrases if len(p) >= MIN_PHRASE]
        ids = [self.user_id] if len(self.user_id) >= MIN_ID else []
        return sorted({*self._names, *phrases, self.logged_as, *ids})

    def where_held(self, column: Any, *, as_json: bool = False) -> list[ColumnElement[bool]]:
        """SQL conditions (one per batch of terms, to be OR-ed by running each) that keep the
        rows whose ``column`` may hold the member, any case: a coarse sieve in the database
        before ``held_in`` decides. JSON columns are matched as their stored text."""
        target = cast(column, String) if as_json else column
        terms: set[str] = set()
        for needle in self.needles:
            terms.add(needle)
            if as_json:
                terms.add(json.dumps(needle)[1:-1])  # as the JSON text escapes it
        patterns = [f"%{_like_escaped(t)}%" for t in sorted(terms)]
        return [
            or_(*(target.ilike(p, escape="\\") for p in patterns[i : i + SQL_TERMS]))
            for i in range(0, len(patterns), SQL_TERMS)
        ]


def _like_escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

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
MIN_FIRST = 3  # a shorter first word ("Al", "Jo") is too many words' beginning
NOT_FIRST_NAMES = frozenset(  # first words of a name that are not a first name
    {"the", "a", "an", "mr", "mrs", "ms", "miss", "dr", "sir", "madam", "mister", "lady"}
    | {"lord", "captain", "professor", "prof", "my"}
)
# what a look-alike spelling puts between a name's letters: spaces, underscores, dots, dashes,
# zero-width characters ("Z_e_b_u_l_o_n", "Zeb.ulon", "Z e b u l o n")
_APART = r"[\s_.\-\u200b-\u200d\u2060\ufeff]*"


@dataclass(frozen=True)
class Member:
    platform: str
    user_id: str
    names: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    spared: tuple[str, ...] = ()  # never taken for the member's first name: the residents'

    @property
    def logged_as(self) -> str:
        """The tail of the member's audit identity: ``(discord:1234)``."""
        return f"({self.platform}:{self.user_id})"

    @cached_property
    def _names(self) -> set[str]:
        """Each name as given, without the visitor marker, and unquoted, and the first name of
        each (an answer says "Hi Zebulon" to Zebulon Quux), unless it is a resident's."""
        names = set(self.names) | {n.removesuffix(MARKER).strip() for n in self.names}
        names = {n for n in names | {n.strip('"') for n in names} if n}
        spared = {w.casefold() for s in self.spared for w in (s, *s.split()[:1])}
        firsts = {n.split()[0].strip("\"'.,") for n in names if len(n.split()) > 1}
        firsts = {
            f
            for f in firsts
            if len(f) >= MIN_FIRST
            and f.casefold() not in NOT_FIRST_NAMES
            and f.casefold() not in spared
        }
        return names | firsts

    @cached_property
    def _pattern(self) -> re.Pattern[str]:
        """The member's names (any case, spelled apart too) as the group ``name``, their
        words, their audit identity and their id."""
        longest_first = sorted(self._names, key=len, reverse=True)
        names = [rf"(?<!\w){_spelled_apart(n)}(?!\w)" for n in longest_first]
        parts = [f"(?P<name>{'|'.join(names)})"] if names else []
        parts += [re.escape(p) for p in self.phrases if len(p) >= MIN_PHRASE]
        parts.append(re.escape(self.logged_as))
        if len(self.user_id) >= MIN_ID:  # a mention of them (<@1234...>, an admin's forget)
            parts.append(rf"(?<!\w){re.escape(self.user_id)}(?!\w)")
        return re.compile("|".join(parts), re.IGNORECASE)

    def held_in(self, text: str) -> bool:
        """Whether ``text`` names the member or quotes them."""
        return self._pattern.search(text) is not None

    def redact(self, text: str) -> str:
        """``text`` with the member's names and words taken out."""
        return self._pattern.sub(lambda m: FORGOTTEN if m.group("name") else GONE, text)

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
        terms: set[tuple[str, ...]] = set()
        apart = set(self._names)  # a name matches spelled apart too: its letters in order
        for needle in self.needles:
            chars = tuple(needle.replace(" ", "")) if needle in apart else (needle,)
            terms.add(chars)
            if as_json:  # as the JSON text escapes it
                terms.add(tuple(json.dumps(c)[1:-1] for c in chars))
        patterns = [f"%{'%'.join(_like_escaped(c) for c in t)}%" for t in sorted(terms)]
        return [
            or_(*(target.ilike(p, escape="\\") for p in patterns[i : i + SQL_TERMS]))
            for i in range(0, len(patterns), SQL_TERMS)
        ]


def _spelled_apart(name: str) -> str:
    """A pattern for ``name`` with anything ``_APART`` between its letters (its spaces too)."""
    return _APART.join(re.escape(c) for c in name.replace(" ", ""))


def _like_escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

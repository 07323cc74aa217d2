"""A visitor's name as the town shows it: never passing for a resident, an inner voice or a
mention. A name that equals or holds a resident's name (or first name), begins with "Inner
voice", or holds mention syntax is shown, stored and given to residents with a visitor marker."""

from __future__ import annotations

import re
from collections.abc import Iterable

MARKER = " (a visitor)"
_MENTION = re.compile(r"<[@#!]|@\w|@everyone|@here", re.IGNORECASE)
_INNER_VOICE = re.compile(r"^\W*inner\s*voice", re.IGNORECASE)


def needs_marker(name: str, residents: Iterable[str]) -> bool:
    """Whether ``name`` could pass for a resident, an inner voice or a mention."""
    folded = " ".join(name.split()).casefold()
    if _INNER_VOICE.search(folded) or _MENTION.search(name):
        return True
    words = set(re.findall(r"\w+", folded))
    for resident in residents:
        full = resident.casefold()
        if full in folded or full.split()[0] in words:
            return True
    return False


def visitor_name(name: str, residents: Iterable[str]) -> str:
    """``name`` with the visitor marker when it needs one ("Isabella Rodriguez (a visitor)"); a
    name beginning with "Inner voice" is quoted, so the residents' words about it never begin
    like an admin's inner voice does."""
    if name.endswith(MARKER) or not needs_marker(name, residents):
        return name
    if _INNER_VOICE.search(name):
        return f'"{name}"{MARKER}'
    return f"{name}{MARKER}"

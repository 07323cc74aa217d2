"""A visitor's name as the town shows it: never passing for a resident, an inner voice or a
mention. A name that equals or holds a resident's name (or first name), begins with "Inner
voice", or holds mention syntax is shown, stored and given to residents with a visitor marker.

Names are compared by what they look like, not by their code points: NFKC (fullwidth letters,
ligatures), then Unicode's confusable skeleton (UTS #39: a Cyrillic "а" or "ѕ" reads as the
Latin letter), then case folding; underscores, dots and dashes part words like spaces. The
confusables come from the ``confusable-homoglyphs`` package (Unicode's confusables.txt)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache

from confusable_homoglyphs.confusables import confusables_data

MARKER = " (a visitor)"
_MENTION = re.compile(r"<[@#!]|@\w|@everyone|@here", re.IGNORECASE)
_INNER_VOICE = re.compile(r"^\W*inner\s*voice", re.IGNORECASE)
_DIRECTION_MARKS = str.maketrans("", "", "\u200e\u200f")
_SEPARATORS = re.compile(r"[\W_]+")


def _entries(text: str) -> list[str]:
    return [e["c"].translate(_DIRECTION_MARKS) for e in confusables_data.get(text, [])]


@cache
def _prototype(char: str) -> str:
    """The character (or sequence) that stands for ``char``'s confusable class.

    confusables.txt maps each source to one prototype; the package's data lists both ways, so a
    prototype lists its sources and a source lists only its prototype. A class of exactly two
    (each listing the other) takes the smaller as its stand-in."""
    found = _entries(char)
    if len(found) != 1:
        return char  # no confusable, or a prototype with several sources
    other = found[0]
    if len(_entries(other)) > 1:
        return other
    return min(char, other)


def skeleton(name: str, *, fold_first: bool = True) -> str:
    """``name`` as it looks: NFKC, each character to its confusable prototype, case folded, and
    runs of spaces and punctuation (``_``, ``.``, ``-``) as one space. Folded first, "ISABELLA"
    reads as "isabella"; not folded first, "lsabella" (a small L) reads as "Isabella"."""
    text = unicodedata.normalize("NFKC", name)
    text = text.casefold() if fold_first else text
    mapped = "".join(_prototype(c) for c in unicodedata.normalize("NFD", text))
    folded = unicodedata.normalize("NFKC", mapped).casefold()
    return " ".join(_SEPARATORS.sub(" ", folded).split())


def needs_marker(name: str, residents: Iterable[str]) -> bool:
    """Whether ``name`` could pass for a resident, an inner voice or a mention."""
    plain = unicodedata.normalize("NFKC", name)
    folded = " ".join(plain.split()).casefold()
    if _INNER_VOICE.search(folded) or _MENTION.search(plain) or _MENTION.search(name):
        return True
    if _INNER_VOICE.search(skeleton(name)):
        return True
    residents = list(residents)
    return any(_holds(name, residents, fold_first=f) for f in (True, False))


def _holds(name: str, residents: list[str], *, fold_first: bool) -> bool:
    looks = skeleton(name, fold_first=fold_first)
    words = set(looks.split())
    for resident in residents:
        full = skeleton(resident, fold_first=fold_first)
        if full and (full in looks or full.split()[0] in words):
            return True
    return False


def visitor_name(name: str, residents: Iterable[str]) -> str:
    """``name`` with the visitor marker when it needs one ("Isabella Rodriguez (a visitor)"); a
    name beginning with "Inner voice" is quoted, so the residents' words about it never begin
    like an admin's inner voice does."""
    if name.endswith(MARKER) or not needs_marker(name, residents):
        return name
    if _INNER_VOICE.search(unicodedata.normalize("NFKC", name)) or _INNER_VOICE.search(
        skeleton(name)
    ):
        return f'"{name}"{MARKER}'
    return f"{name}{MARKER}"

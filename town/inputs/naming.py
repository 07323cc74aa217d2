"""A visitor's name as the town shows it: never passing for a resident or an inner voice. A
name that looks like a resident's name (or first name) or begins with "Inner voice" is shown,
stored and given to residents with a visitor marker. Names come plain (``town.text.Name``: no
mention syntax is left to pass for a mention).

Names are compared by what they look like, not by their code points: NFKC (fullwidth letters,
ligatures), then Unicode's confusable skeleton (UTS #39: a Cyrillic "а" or "ѕ" reads as the
Latin letter), then case folding, and without their separators (spaces, underscores, dots,
dashes, zero-width characters): "I_s_a_b_e_l_l_a", "I s a b e l l a" and "Isabel la
Rodriguez" look like Isabella Rodriguez. The confusables come from the
``confusable-homoglyphs`` package (Unicode's confusables.txt)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import cache

from confusable_homoglyphs.confusables import confusables_data

from town.outbox.chatlog import MARKER
from town.text import Line, Name, Plain

__all__ = ["MARKER", "needs_marker", "skeleton", "visitor_name"]

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
    """Whether ``name`` could pass for a resident or an inner voice."""
    if _inner_voice(name) or _INNER_VOICE.search("".join(skeleton(name).split())):
        return True
    residents = list(residents)
    return any(_looks_like(name, residents, fold_first=f) for f in (True, False))


def _inner_voice(name: str) -> bool:
    folded = " ".join(unicodedata.normalize("NFKC", name).split()).casefold()
    return bool(_INNER_VOICE.search(folded) or _INNER_VOICE.search(skeleton(name)))


def _looks_like(name: str, residents: list[str], *, fold_first: bool) -> bool:
    """Whether ``name`` read without its separators holds a resident's full name, or a run of
    its words joined is a resident's first name ("Isa Bella", "I s a b e l l a")."""
    words = skeleton(name, fold_first=fold_first).split()
    joined = "".join(words)
    runs = {"".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, len(words) + 1)}
    for resident in residents:
        full = skeleton(resident, fold_first=fold_first).split()
        if full and ("".join(full) in joined or full[0] in runs):
            return True
    return False


def visitor_name(name: Name, residents: Iterable[str]) -> Name:
    """``name`` with the visitor marker when it needs one ("Isabella Rodriguez (a visitor)"); a
    name beginning with "Inner voice" is quoted, so the residents' words about it never begin
    like an admin's inner voice does."""
    if name.endswith(MARKER) or not needs_marker(name, residents):
        return name
    if _inner_voice(name):
        return Name(Plain(Line(f'"{name}"{MARKER}')))
    return Name(Plain(Line(f"{name}{MARKER}")))

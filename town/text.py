"""Text made fit for where it goes, in one place: one clean line (the audit log, chat lines,
memories, names in prompts), a plain line (no ping: what residents hear and keep, from a
visitor or a model), a person's words as the town takes them (``spoken``), a text cut to its
cap at a natural boundary (what a model writes), and a long text in parts (a platform's
messages).

The town's text is typed: a ``Line`` is clean, a ``Plain`` line is clean and holds no ping, a
``Name`` is a plain line within ``NAME_LIMIT``. Only the constructors here make them, so a layer
that takes one (the chat lines, the audit log) never cleans again, and mypy says where a raw
string would slip in.

Below every layer of the town: it imports nothing of the town's, and the adapters use it too.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import NewType

ELLIPSIS = "…"
MAX_LINE = 2000  # characters of one clean line, unless a caller says otherwise: one input's worth
MAX_WORDS = 2000  # characters of a person's words the town keeps (as the audit log does)
NAME_LIMIT = 80  # characters of a person's name: a visitor's, a resident's, a rater's
ROLE_LIMIT = 200  # characters of the role a visitor takes ("a reporter")

Line = NewType("Line", str)  # one line of printable text, cut (``clean_text``)
Plain = NewType("Plain", Line)  # a line with no ping or mention markup (``plain``)
Name = NewType("Name", Plain)  # a person's name (``name_of``)
A_VISITOR = Name(Plain(Line("a visitor")))  # a visitor whose name is empty once made plain

# Pings in any chat's words: "@everyone", "@here", "@channel" (a fullwidth "＠" too), and
# markup in angle brackets that a chat turns into a ping or a link ("<!channel>", "<@U1>",
# "<@!1>", "<#C1>", "<!subteam^S1>"). The adapters turn their own markup into names people read
# before the words reach the town; what comes by another way (the web page, a model's answer)
# loses it here.
_MASS_PING = re.compile(r"(?<![\w@])[@＠](?:everyone|here|channel)\b", re.IGNORECASE)
_MARKUP = re.compile(r"<[@#!][^<>]*>")
_AT_NAME = re.compile(r"(?<![\w@])[@＠](?=\w)")  # "@Isabella" -> "Isabella"
# Characters that show nothing though their category is a letter's or a symbol's
_SHOWS_NOTHING = ("FILLER", "BLANK")  # HANGUL FILLER (U+3164), BRAILLE PATTERN BLANK (U+2800)
ECHO = 80  # characters of a person's words an answer quotes back (a pasted essay is not)
# A sentence's end: its mark and any closing quotes or brackets, where white space follows.
_SENTENCE_END = re.compile(r"[.!?…][\"')\]]*(?=\s)")


def clean_text(text: str, limit: int = MAX_LINE, *, unprintable: str = " ") -> Line:
    """One line of printable text: each control or format character (Unicode category C) that
    is not white space becomes ``unprintable`` (a space; "" drops it), white space is folded to
    single spaces, and a text longer than ``limit`` is cut there, its last character an
    ellipsis."""
    kept = "".join(_printable(ch, unprintable) for ch in text)
    flat = " ".join(kept.split())
    return Line(flat if len(flat) <= limit else flat[: limit - 1] + ELLIPSIS)


def plain(text: str, limit: int = MAX_LINE, *, unprintable: str = " ") -> Plain:
    """``text`` as one clean line (``clean_text``) with no ping: no mass ping (``@everyone``,
    ``@here``, ``<!channel>``), no mention markup (``<@U0123>``); ``@Isabella`` keeps the
    name. What residents hear and keep, whoever wrote it (a visitor, a model)."""
    line = clean_text(text, limit, unprintable=unprintable)
    unpinged = _AT_NAME.sub("", _MARKUP.sub(" ", _MASS_PING.sub(" ", line)))
    return Plain(Line(" ".join(unpinged.split())))


def name_of(text: str) -> Name:
    """A person's name as the town keeps it: a plain line of at most ``NAME_LIMIT``
    characters ("" when nothing is left)."""
    return Name(plain(text, NAME_LIMIT))


def shows_something(text: str) -> bool:
    """Whether ``text`` shows a letter, a digit or a symbol (an emoji) to a reader, by the
    characters' Unicode categories: marks alone (combining accents, variation selectors),
    spaces, control and format characters show nothing, nor do the letters and symbols Unicode
    names a filler or a blank."""
    return any(_visible(ch) for ch in text)


def _visible(ch: str) -> bool:
    if unicodedata.category(ch)[0] not in "LNS":
        return False
    return not any(word in unicodedata.name(ch, "") for word in _SHOWS_NOTHING)


class EmptyWords(ValueError):
    """A message with nothing to hear once cleaned: spaces, control or invisible characters,
    marks alone, mention syntax only. The person is told; nothing is stored."""

    def __init__(self) -> None:
        super().__init__(
            "say what? the message is empty once cleaned (only spaces, invisible or control "
            "characters, marks without a letter, or mentions); write some words"
        )


@dataclass(frozen=True)
class Spoken:
    """A person's words as the town takes them, made once at the edge (``spoken``)."""

    said: Line  # as they came, on one line (the audit log's record)
    heard: Plain  # as residents hear, remember and retell them
    name: Name  # who said them, plain ("a visitor" when nothing is left)


def spoken(name: str, words: str) -> Spoken:
    """``words`` said by ``name``, in the three forms the town keeps. Raises
    :class:`EmptyWords` when the words heard show no letter, digit or emoji."""
    heard = plain(words, MAX_WORDS)
    if not shows_something(heard):
        raise EmptyWords()
    return Spoken(clean_text(words, MAX_WORDS), heard, name_of(name) or A_VISITOR)


def echoed(text: str) -> str:
    """What of a person's words an answer or an error quotes back: one clean line of at most
    ``ECHO`` characters."""
    return clean_text(text, ECHO)


def _printable(ch: str, unprintable: str) -> str:
    if unicodedata.category(ch)[0] != "C":
        return ch
    return " " if ch.isspace() else unprintable


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: whole sentences when the cut keeps more than half,
    else whole words, else a hard cut."""
    if len(text) <= limit:
        return text
    head = text[: limit + 1]  # one more: a sentence may end exactly at the limit
    ends = [m.end() for m in _SENTENCE_END.finditer(head) if m.end() <= limit]
    if ends and ends[-1] > limit // 2:
        return head[: ends[-1]].rstrip()
    space = head.rfind(" ", 0, limit + 1)
    if space > limit // 2:
        return head[:space].rstrip(" ,;:-")
    return text[:limit]


def in_parts(text: str, limit: int) -> list[str]:
    """``text`` in parts of at most ``limit`` characters, cut at sentence ends where possible,
    then at spaces, then anywhere. Nothing is dropped."""
    if limit < 1:
        raise ValueError("limit must be positive")
    text = text.strip()
    if len(text) <= limit:
        return [text] if text else []
    parts: list[str] = []
    current = ""
    for piece in _pieces(text, limit):
        joined = f"{current} {piece}" if current else piece
        if len(joined) <= limit:
            current = joined
        else:
            parts.append(current)
            current = piece
    if current:
        parts.append(current)
    return parts


def _sentences(text: str) -> list[str]:
    """``text``'s sentences, the white space between them dropped."""
    found: list[str] = []
    start = 0
    for end in _SENTENCE_END.finditer(text):
        found.append(text[start : end.end()])
        start = end.end()
    found.append(text[start:])
    return [s.strip() for s in found if s.strip()]


def _pieces(text: str, limit: int) -> list[str]:
    """Sentences, each cut to ``limit`` at spaces (or hard) when it is longer."""
    out: list[str] = []
    for sentence in _sentences(text):
        while len(sentence) > limit:
            space = sentence.rfind(" ", 0, limit + 1)
            space = space if space > 0 else limit
            out.append(sentence[:space].rstrip())
            sentence = sentence[space:].lstrip()
        if sentence:
            out.append(sentence)
    return out

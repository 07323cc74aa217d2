"""Text made fit for where it goes, in one place: one clean line (the audit log, chat lines,
memories, names in prompts), a text cut to its cap at a natural boundary (what a model writes),
and a long text in parts (a platform's messages).

Below every layer of the town: it imports nothing of the town's, and the adapters use it too.
"""

from __future__ import annotations

import re
import unicodedata

ELLIPSIS = "…"
MAX_LINE = 2000  # characters of one clean line, unless a caller says otherwise: one input's worth
ECHO = 80  # characters of a person's words an answer quotes back (a pasted essay is not)
# A sentence's end: its mark and any closing quotes or brackets, where white space follows.
_SENTENCE_END = re.compile(r"[.!?…][\"')\]]*(?=\s)")


def clean_text(text: str, limit: int = MAX_LINE, *, unprintable: str = " ") -> str:
    """One line of printable text: each control or format character (Unicode category C) that
    is not white space becomes ``unprintable`` (a space; "" drops it), white space is folded to
    single spaces, and a text longer than ``limit`` is cut there, its last character an
    ellipsis."""
    kept = "".join(_printable(ch, unprintable) for ch in text)
    flat = " ".join(kept.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + ELLIPSIS


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

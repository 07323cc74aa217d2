"""Small text helpers for the offline brain: words, names, overlap, person."""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from collections.abc import Iterable

from pydantic import BaseModel

from town.llm.offline.lexicon import EMOJI, IMPORTANCE, STOPWORDS

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_NAME = re.compile(r"\b[A-Z][a-zA-Z'’-]*(?:\s+[A-Z][a-zA-Z'’-]*)*")


def stable_rng(salt: str, inputs: BaseModel, exclude: set[str] | None = None) -> random.Random:
    """A generator seeded by a stable hash of the inputs (the same on every run and machine),
    the fields in ``exclude`` left out."""
    dumped = inputs.model_dump_json(exclude=exclude)
    digest = hashlib.sha256(f"{salt}\n{dumped}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def words(text: str) -> list[str]:
    """Lower-case words, possessives dropped ("Isabella's" -> "isabella")."""
    found = _WORD.findall(text.lower().replace("’", "'"))
    return [w[:-2] if w.endswith("'s") else w for w in found]


def stem(word: str) -> str:
    for suffix in ("ing", "es", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def emoji_for(action: str) -> str:
    """1-3 emoji for an action, from its words ("💭" when none fits)."""
    found: list[str] = []
    for word in words(action):
        symbol = EMOJI.get(word) or EMOJI.get(stem(word))
        if symbol and symbol not in found:
            found.append(symbol)
    return "".join(found[:3]) or "💭"


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if len(w) > 2 and w not in STOPWORDS and not w.isdigit()]


def stems(text: str) -> set[str]:
    return {stem(w) for w in content_words(text)}


def overlap(a: str, b: str) -> int:
    return len(stems(a) & stems(b))


def names(text: str) -> list[str]:
    """Capitalised word runs that look like names of people or places."""
    found = []
    for match in _NAME.findall(text):
        parts = [p.removesuffix("'s").removesuffix("’s") for p in match.split()]
        while parts and parts[0].lower() in STOPWORDS:
            parts = parts[1:]
        if parts:
            found.append(" ".join(parts))
    return found


def most_common(items: Iterable[str], n: int) -> list[str]:
    """The n most frequent items, ties broken by first appearance."""
    counts = Counter(items)
    order = {item: index for index, item in reversed(list(enumerate(counts)))}
    return sorted(counts, key=lambda item: (-counts[item], order[item]))[:n]


def first_name(name: str) -> str:
    return name.split()[0] if name.split() else name


def mentions(text: str, name: str) -> bool:
    """Whether the text names this person (full or first name)."""
    lowered = words(text)
    return any(part.lower() in lowered for part in {name, first_name(name)} if part) or (
        name.lower() in text.lower()
    )


def sentence(text: str) -> str:
    text = " ".join(text.split())
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def first_person(text: str, resident: str) -> str:
    """Retell a third-person memory of the resident in the first person."""
    out = text
    for name in (resident, first_name(resident)):
        if not name:
            continue
        pattern = re.escape(name)
        out = re.sub(rf"\b{pattern}(?:'s|’s)", "my", out)
        out = re.sub(rf"\b{pattern} is\b", "I am", out)
        out = re.sub(rf"\b{pattern} was\b", "I was", out)
        out = re.sub(rf"\b{pattern} has\b", "I have", out)
        out = re.sub(rf"\b{pattern}\b", "I", out)
    return out


def second_to_first(text: str) -> str:
    """Turn an inner-voice directive ("You are going to ...") into the resident's own words."""
    swaps = {
        "you are": "I am",
        "you're": "I'm",
        "you will": "I will",
        "you": "I",
        "your": "my",
        "yours": "mine",
        "yourself": "myself",
    }
    pattern = re.compile(r"\b(you are|you're|you will|yourself|yours|your|you)\b", re.IGNORECASE)
    return pattern.sub(lambda m: swaps[m.group(0).lower()], text)


_ORDINARY = 2


def importance(observation: str) -> int:
    """1 (mundane) to 10 (poignant), from the most telling word of the observation."""
    found = words(observation)
    scores = [IMPORTANCE.get(w, IMPORTANCE.get(stem(w), 0)) for w in found]
    score = max([*scores, _ORDINARY])
    if "!" in observation:
        score += 1
    return max(1, min(10, score))

"""The measures' pieces: relationship density, who knows what from the seed memories, which
memories speak of a fact, and the diffusion curves over game time."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations

from town.experiments.society.judge import names_keyword
from town.world.persona import Fact

_TOPIC_STOP = frozenset(
    {
        *("about", "after", "again", "also", "anyone", "been", "being", "coming", "could"),
        *("does", "doing", "going", "have", "heard", "know", "knows", "people", "person"),
        *("running", "someone", "something", "there", "their", "they", "thing", "this"),
        *("what", "when", "where", "which", "while", "whom", "whose", "will", "with"),
        *("would", "your"),
    }
)


@dataclass(frozen=True)
class MemoryRow:
    resident: str
    kind: str
    text: str
    created: datetime


def density(vertices: int, edges: Sequence[object]) -> float:
    """eta = 2|E| / (|V|(|V|-1)); 0 for fewer than two vertices."""
    if vertices < 2:
        return 0.0
    return 2 * len(edges) / (vertices * (vertices - 1))


def mutual_edges(
    knows: Mapping[str, Iterable[str]], residents: Sequence[str]
) -> list[tuple[str, str]]:
    """The pairs (in ``residents`` order) where each knows the other."""
    sets = {name: set(knows.get(name, ())) for name in residents}
    return [(a, b) for a, b in combinations(residents, 2) if b in sets[a] and a in sets[b]]


def name_keywords(name: str) -> list[str]:
    """A resident's full name, then its first name."""
    parts = name.split()
    return [name, parts[0]] if len(parts) > 1 else [name]


def names_person(text: str, name: str) -> bool:
    return bool(names_keyword(text, name_keywords(name)))


def _flat(text: str) -> str:
    return " ".join(text.split()).casefold()


def holds_phrase(text: str, fact: Fact) -> bool:
    return _flat(fact.phrase) in _flat(text)


def topic_words(fact: Fact) -> list[str]:
    """The telling words of a fact's question ("party", "valentine", "mayor")."""
    found = re.findall(r"[A-Za-z]+", fact.question.replace("'s", ""))
    return [w.casefold() for w in found if len(w) > 3 and w.casefold() not in _TOPIC_STOP]


def mentions_fact(text: str, fact: Fact) -> bool:
    """Does a memory speak of the fact? Its phrase, or a keyword together with a topic word."""
    if holds_phrase(text, fact):
        return True
    if not names_keyword(text, fact.keywords):
        return False
    folded = text.casefold()
    return any(word in folded for word in topic_words(fact))


def seed_knowledge(
    memories: Mapping[str, Sequence[MemoryRow]], residents: Sequence[str], facts: Sequence[Fact]
) -> tuple[dict[str, list[str]], dict[str, set[str]]]:
    """Who knows each fact, and whom each resident knows, according to the seed memories."""
    seeds = {
        name: [m.text for m in memories.get(name, ()) if m.kind == "seed"] for name in residents
    }
    facts_known = {
        fact.id: [name for name in residents if any(holds_phrase(t, fact) for t in seeds[name])]
        for fact in facts
    }
    people = {
        name: {
            other
            for other in residents
            if other != name and any(names_person(t, other) for t in seeds[name])
        }
        for name in residents
    }
    return facts_known, people


def diffusion_curves(
    memories: Mapping[str, Sequence[MemoryRow]],
    residents: Sequence[str],
    facts: Sequence[Fact],
    start: datetime,
    end: datetime,
) -> dict[str, list[tuple[datetime, int]]]:
    """For each fact: (game time, how many residents have a memory mentioning it by then), a
    step at each first mention; seed memories count from ``start``."""
    curves: dict[str, list[tuple[datetime, int]]] = {}
    for fact in facts:
        firsts: list[datetime] = []
        for name in residents:
            times = [
                start if m.kind == "seed" else max(m.created, start)
                for m in memories.get(name, ())
                if mentions_fact(m.text, fact)
            ]
            if times:
                firsts.append(min(times))
        firsts.sort()
        points = [(start, sum(1 for t in firsts if t <= start))]
        for i, at in enumerate(firsts):
            if at > start:
                points.append((at, i + 1))
        points.append((max(end, points[-1][0]), len(firsts)))
        curves[fact.id] = points
    return curves

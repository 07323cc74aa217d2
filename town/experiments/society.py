"""The society measures of Park et al. (section 7): information diffusion, relationship density,
party attendance and hallucinated knowledge, measured on a town after a simulation.

Every resident is interviewed (``town.inputs.interview``: nothing changes in the town but the
memories' last-access times) about each seeded fact and about each other resident; each answer is
judged yes or no (the ``judge_knows`` task through the brain); each yes is checked against the
resident's memory stream. The start of the run is read from the seed memories, the course of the
run from the memories' creation times and the replay file's events.

Definitions (kept simple and stated so results can be compared):

- a resident *knows a fact at the start* when one of its seed memories holds the fact's phrase;
- a resident *knows another at the start* when one of its seed memories names the other (full
  name, or first name as a whole word);
- a *yes* is *supported* when some memory of the resident names one of the fact's keywords (or,
  for a person, the other's name); an unsupported yes is a *hallucination*;
- a memory *mentions a fact* (for the curve over time) when it names a keyword and a topic word
  of the fact's question (``mayor``, ``party`` ...), or holds the fact's phrase;
- *knowing at the end* is a supported yes; an edge of the relationship graph is mutual knowing;
- *invited* residents are those who knew the event's fact at the end (the host left out), as the
  paper counts its 12 invited; *attended* means being in the event's area during its hours
  (from the replay's ``moved`` and ``action`` events, and conversations held there).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from itertools import combinations
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, select

from town.inputs.query import interview
from town.llm.offline.judge import names_keyword
from town.llm.schemas import JudgeKnowsInput
from town.llm.tasks import JUDGE_KNOWS
from town.store.models import Conversation, Memory, Resident
from town.tick.engine import Engine
from town.world.persona import Event, Fact, ScenarioSpec
from town.world.places import World

PAPER_DIFFUSION: dict[str, tuple[float, float]] = {
    "mayor_election": (0.04, 0.32),
    "valentines_party": (0.04, 0.48),
}
PAPER_DENSITY = (0.167, 0.74)
PAPER_ATTENDANCE = (5, 12)
PAPER_HALLUCINATION_RATE = 0.013
PAPER: dict[str, Any] = {
    "diffusion": PAPER_DIFFUSION,
    "density": PAPER_DENSITY,
    "attendance": PAPER_ATTENDANCE,
    "hallucination_rate": PAPER_HALLUCINATION_RATE,
}
"""The paper's figures (25 agents, 2 game days): mayor 1 -> 8 of 25, party 1 -> 12 of 25,
density 0.167 -> 0.74, 5 of the 12 invited came, 6 of 453 answers (1.3%) hallucinated."""

_TOPIC_STOP = frozenset(
    {
        *("about", "after", "again", "also", "anyone", "been", "being", "coming", "could"),
        *("does", "doing", "going", "have", "heard", "know", "knows", "people", "person"),
        *("running", "someone", "something", "there", "their", "they", "thing", "this"),
        *("what", "when", "where", "which", "while", "whom", "whose", "will", "with"),
        *("would", "your"),
    }
)
_YES = re.compile(r"^\W*(yes|y|true|knows?)\b", re.IGNORECASE)
_NO = re.compile(r"^\W*(no|n|false|unknown|does not|doesn't)\b", re.IGNORECASE)


@dataclass(frozen=True)
class MemoryRow:
    resident: str
    kind: str
    text: str
    created: datetime


@dataclass
class Answer:
    """One question to one resident, its answer and the judgment."""

    resident: str
    kind: str  # "fact" or "person"
    subject: str  # a fact id or a resident's name
    question: str
    answer: str = ""
    verdict: str = "no"  # yes or no, as judged ("no" when the judge's reply was unparseable)
    judge_reply: str = ""
    reason: str = ""
    parsed: bool = True
    supported: bool = False
    hallucinated: bool = False
    error: str = ""

    @property
    def yes(self) -> bool:
        return self.verdict == "yes"

    @property
    def knows(self) -> bool:
        return self.yes and not self.hallucinated


@dataclass
class Diffusion:
    fact: str
    question: str
    residents: int
    start: list[str]
    end: list[str]

    @property
    def start_share(self) -> float:
        return len(self.start) / self.residents if self.residents else 0.0

    @property
    def end_share(self) -> float:
        return len(self.end) / self.residents if self.residents else 0.0


@dataclass
class Attendance:
    event: str
    name: str
    location: str
    start: datetime
    end: datetime
    host: str
    present: list[str]  # everyone seen there during its hours, host left out
    invited: list[str]  # knew the event's fact at the end, host left out
    attended: list[str]  # invited and present
    source: str


@dataclass
class SocietyResult:
    town: str
    residents: list[str]
    answers: list[Answer] = field(default_factory=list)
    diffusion: list[Diffusion] = field(default_factory=list)
    edges_start: list[tuple[str, str]] = field(default_factory=list)
    edges_end: list[tuple[str, str]] = field(default_factory=list)
    attendance: list[Attendance] = field(default_factory=list)
    curves: dict[str, list[tuple[datetime, int]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def density_start(self) -> float:
        return density(len(self.residents), self.edges_start)

    @property
    def density_end(self) -> float:
        return density(len(self.residents), self.edges_end)

    @property
    def yeses(self) -> list[Answer]:
        return [a for a in self.answers if a.yes]

    @property
    def hallucinations(self) -> list[Answer]:
        return [a for a in self.answers if a.hallucinated]

    @property
    def hallucination_rate(self) -> float:
        yeses = len(self.yeses)
        return len(self.hallucinations) / yeses if yeses else 0.0

    @property
    def unparseable(self) -> list[Answer]:
        return [a for a in self.answers if not a.parsed]

    def summary(self) -> dict[str, Any]:
        """The figures as plain data (for JSON)."""
        return {
            "town": self.town,
            "residents": self.residents,
            "diffusion": {
                d.fact: {
                    "question": d.question,
                    "start": d.start,
                    "end": d.end,
                    "start_share": d.start_share,
                    "end_share": d.end_share,
                }
                for d in self.diffusion
            },
            "density": {"start": self.density_start, "end": self.density_end},
            "edges": {
                "start": [list(e) for e in self.edges_start],
                "end": [list(e) for e in self.edges_end],
            },
            "attendance": [
                {**asdict(a), "start": a.start.isoformat(), "end": a.end.isoformat()}
                for a in self.attendance
            ],
            "answers": len(self.answers),
            "yes": len(self.yeses),
            "hallucinated": len(self.hallucinations),
            "hallucination_rate": self.hallucination_rate,
            "unparseable_judgments": len(self.unparseable),
            "curves": {
                fact: [[at.isoformat(), n] for at, n in points]
                for fact, points in self.curves.items()
            },
            "problems": self.problems,
            "paper": PAPER,
        }


# -- the pieces --------------------------------------------------------------------------------


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


def parse_verdict(reply: str) -> bool | None:
    """``"yes"`` -> True, ``"no"`` -> False, anything else -> None (unparseable)."""
    if _YES.search(reply):
        return True
    if _NO.search(reply):
        return False
    return None


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


def supported(answer: Answer, memories: Sequence[MemoryRow], facts: Mapping[str, Fact]) -> bool:
    """Does any memory of the resident back up the claim (the fact's keywords, the name)?"""
    if answer.kind == "fact":
        keywords = facts[answer.subject].keywords
        return any(names_keyword(m.text, keywords) for m in memories)
    return any(names_person(m.text, answer.subject) for m in memories)


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


# -- where residents were ----------------------------------------------------------------------


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def read_replay(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The replay's events, and how many lines could not be read (they are skipped)."""
    events: list[dict[str, Any]] = []
    bad = 0
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            try:
                item = json.loads(line)
                item["at"] = _aware(datetime.fromisoformat(item["at"]))
            except (ValueError, KeyError, TypeError):
                bad += 1
                continue
            if isinstance(item, dict):
                events.append(item)
    return events, bad


def whereabouts(events: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[datetime, str]]]:
    """Each resident's (time, area) from the replay's ``moved`` (arrivals) and ``action``
    (location) events, in time order; a departure's ``from`` gives where it was before."""
    seen: dict[str, list[tuple[datetime, str]]] = {}
    for event in sorted(events, key=lambda e: e["at"]):
        who = event.get("resident") or ""
        if not who:
            continue
        at: datetime = event["at"]
        place = ""
        if event.get("kind") == "moved" and event.get("to"):
            track = seen.setdefault(who, [])
            if not track and event.get("from"):
                track.append((at, World.area_of(str(event["from"]))))
            place = str(event["to"])
        elif event.get("kind") == "action" and event.get("location"):
            place = str(event["location"])
        if place:
            seen.setdefault(who, []).append((at, World.area_of(place)))
    return seen


def present_at(
    track: Sequence[tuple[datetime, str]], area: str, start: datetime, end: datetime
) -> bool:
    """Was the resident in ``area`` at some moment of [start, end)? Each known place holds
    until the next one is known."""
    for i, (at, where) in enumerate(track):
        until = track[i + 1][0] if i + 1 < len(track) else None
        if where == area and at < end and (until is None or until > start):
            return True
    return False


def attendance(
    event: Event,
    residents: Sequence[str],
    invited: Sequence[str],
    tracks: Mapping[str, Sequence[tuple[datetime, str]]],
    conversations: Sequence[Conversation],
    source: str,
) -> Attendance:
    start, end = event.starts_at, event.ends_at
    area = World.area_of(event.location)
    here = {name for name in residents if present_at(tracks.get(name, ()), area, start, end)}
    for talk in conversations:
        began, ended = _aware(talk.started), _aware(talk.ended or talk.started)
        if World.area_of(talk.location) == area and began < end and ended >= start:
            here.update(p for p in talk.participants if p in residents)
    present = [n for n in residents if n in here and n != event.host]
    guests = [n for n in invited if n != event.host]
    return Attendance(
        event=event.id,
        name=event.name,
        location=area,
        start=start,
        end=end,
        host=event.host,
        present=present,
        invited=guests,
        attended=[n for n in guests if n in here],
        source=source,
    )


# -- the whole evaluation ----------------------------------------------------------------------


def load_memories(session: Session, rows: Mapping[str, Resident]) -> dict[str, list[MemoryRow]]:
    by_id = {r.id: name for name, r in rows.items()}
    found = session.exec(
        select(Memory).where(col(Memory.resident_id).in_(list(by_id))).order_by(col(Memory.id))
    ).all()
    memories: dict[str, list[MemoryRow]] = {name: [] for name in rows}
    for m in found:
        name = by_id[m.resident_id]
        memories[name].append(MemoryRow(name, m.kind, m.text, _aware(m.created)))
    return memories


async def judge(engine: Engine, answer: Answer, subject: str, keywords: list[str]) -> None:
    """Judge one answer in place; an unparseable or failed judgment counts as "no"."""
    try:
        result = await engine.brain.run(
            JUDGE_KNOWS,
            JudgeKnowsInput(
                question=answer.question, answer=answer.answer, subject=subject, keywords=keywords
            ),
            resident=answer.resident,
        )
    except Exception as error:  # any failed judgment is kept as an unparsed "no"
        answer.parsed, answer.verdict = False, "no"
        answer.reason = f"judge failed: {type(error).__name__}: {error}"[:300]
        return
    answer.judge_reply, answer.reason = result.verdict, result.reason
    verdict = parse_verdict(result.verdict)
    answer.parsed = verdict is not None
    answer.verdict = "yes" if verdict else "no"


Progress = Callable[[Answer], None]


async def evaluate(
    engine: Engine,
    scenario: ScenarioSpec,
    *,
    town_name: str = "",
    replay: Sequence[Mapping[str, Any]] | None = None,
    progress: Progress | None = None,
) -> SocietyResult:
    """Interview, judge and measure. Trouble (no seeded facts, a failed interview, an
    unparseable judgment) is named in ``problems``; whatever can be measured still is."""
    facts = {fact.id: fact for fact in scenario.facts}
    with engine.store.session() as session:
        rows = engine.residents(session)
        clock = _aware(engine.town(session).clock)
        memories = load_memories(session, rows)
        talks = list(
            session.exec(select(Conversation).where(Conversation.town_id == engine.town_id)).all()
        )
    names = list(rows)
    result = SocietyResult(town=town_name or scenario.name, residents=names)
    if not scenario.facts:
        result.problems.append(
            f"the town {result.town!r} has no seeded facts, so diffusion is not measured: add "
            "[[facts]] (id, resident, phrase, question, keywords) to its scenario.toml"
        )

    questions: list[tuple[Answer, str, list[str]]] = []
    for name in names:
        for fact in scenario.facts:
            about = f"{fact.question.rstrip('?')} (the news: {fact.phrase})"
            questions.append((Answer(name, "fact", fact.id, fact.question), about, fact.keywords))
        for other in names:
            if other != name:
                ask = Answer(name, "person", other, f"Do you know {other}?")
                questions.append((ask, other, name_keywords(other)))

    for answer, subject, keywords in questions:
        try:
            answer.answer = await interview(engine, answer.resident, answer.question)
        except Exception as error:  # one failed interview must not lose the rest
            answer.error = f"{type(error).__name__}: {error}"[:300]
            answer.verdict, answer.parsed = "no", True
            result.problems.append(f"{answer.resident}: {answer.question}: {answer.error}")
        else:
            await judge(engine, answer, subject, keywords)
            if answer.yes:
                answer.supported = supported(answer, memories[answer.resident], facts)
                answer.hallucinated = not answer.supported
        result.answers.append(answer)
        if progress:
            progress(answer)
    bad = result.unparseable
    if bad:
        result.problems.append(
            f"{len(bad)} judgment(s) could not be read as yes or no and count as no"
        )

    seeded_facts, seeded_people = seed_knowledge(memories, names, scenario.facts)
    for fact in scenario.facts:
        end = [a.resident for a in result.answers if a.subject == fact.id and a.knows]
        result.diffusion.append(
            Diffusion(fact.id, fact.question, len(names), seeded_facts[fact.id], end)
        )
    result.edges_start = mutual_edges(seeded_people, names)
    knows_end: dict[str, set[str]] = {name: set() for name in names}
    for a in result.answers:
        if a.kind == "person" and a.knows:
            knows_end[a.resident].add(a.subject)
    result.edges_end = mutual_edges(knows_end, names)

    start = min(
        (m.created for ms in memories.values() for m in ms if m.kind == "seed"), default=clock
    )
    result.curves = diffusion_curves(memories, names, scenario.facts, start, clock)

    tracks = whereabouts(replay or [])
    source = "conversations only (no replay)" if replay is None else "replay and conversations"
    for event in scenario.events:
        knew = [d.end for d in result.diffusion if d.fact == event.fact]
        if not event.fact:
            result.problems.append(f"event {event.id!r} names no fact: nobody counts as invited")
        result.attendance.append(
            attendance(event, names, knew[0] if knew else [], tracks, talks, source)
        )
    return result

"""The society evaluation: every resident interviewed about each fact and each other resident,
each answer judged and checked against its memories, then measured."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select

from town.experiments.society.attendance import attendance, aware, whereabouts
from town.experiments.society.judge import JUDGE_KNOWS, JudgeKnowsInput, names_keyword
from town.experiments.society.measures import (
    MemoryRow,
    diffusion_curves,
    mutual_edges,
    name_keywords,
    names_person,
    seed_knowledge,
)
from town.experiments.society.result import Answer, Diffusion, SocietyResult
from town.inputs.query import interview
from town.store.models import Conversation, Memory, Resident
from town.tick.engine import Engine
from town.world.persona import Fact, ScenarioSpec

_YES = re.compile(r"^\W*(yes|y|true|knows?)\b", re.IGNORECASE)
_NO = re.compile(r"^\W*(no|n|false|unknown|does not|doesn't)\b", re.IGNORECASE)


def parse_verdict(reply: str) -> bool | None:
    """``"yes"`` -> True, ``"no"`` -> False, anything else -> None (unparseable)."""
    if _YES.search(reply):
        return True
    if _NO.search(reply):
        return False
    return None


def supported(answer: Answer, memories: Sequence[MemoryRow], facts: Mapping[str, Fact]) -> bool:
    """Does any memory of the resident back up the claim (the fact's keywords, the name)?"""
    if answer.kind == "fact":
        keywords = facts[answer.subject].keywords
        return any(names_keyword(m.text, keywords) for m in memories)
    return any(names_person(m.text, answer.subject) for m in memories)


def load_memories(session: Session, rows: Mapping[str, Resident]) -> dict[str, list[MemoryRow]]:
    by_id = {r.id: name for name, r in rows.items()}
    found = session.exec(
        select(Memory).where(col(Memory.resident_id).in_(list(by_id))).order_by(col(Memory.id))
    ).all()
    memories: dict[str, list[MemoryRow]] = {name: [] for name in rows}
    for m in found:
        name = by_id[m.resident_id]
        memories[name].append(MemoryRow(name, m.kind, m.text, aware(m.created)))
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
Asked = tuple[Answer, str, list[str]]  # the answer to fill in, its subject and its keywords


def questions(names: Sequence[str], facts: Sequence[Fact]) -> list[Asked]:
    """Resident by resident: each fact, then each other resident."""
    asked: list[Asked] = []
    for name in names:
        for fact in facts:
            about = f"{fact.question.rstrip('?')} (the news: {fact.phrase})"
            asked.append((Answer(name, "fact", fact.id, fact.question), about, fact.keywords))
        for other in names:
            if other != name:
                ask = Answer(name, "person", other, f"Do you know {other}?")
                asked.append((ask, other, name_keywords(other)))
    return asked


async def ask(
    engine: Engine, asked: Asked, memories: Sequence[MemoryRow], facts: Mapping[str, Fact]
) -> Answer:
    """Interview, judge, and check a yes against the resident's memories."""
    answer, subject, keywords = asked
    try:
        answer.answer = await interview(engine, answer.resident, answer.question)
    except Exception as error:  # one failed interview must not lose the rest
        answer.error = f"{type(error).__name__}: {error}"[:300]
        answer.verdict, answer.parsed = "no", True
        return answer
    await judge(engine, answer, subject, keywords)
    if answer.yes:
        answer.supported = supported(answer, memories, facts)
        answer.hallucinated = not answer.supported
    return answer


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
        clock = aware(engine.town(session).clock)
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
    for asked in questions(names, scenario.facts):
        answer = await ask(engine, asked, memories[asked[0].resident], facts)
        if answer.error:
            result.problems.append(f"{answer.resident}: {answer.question}: {answer.error}")
        result.answers.append(answer)
        if progress:
            progress(answer)
    bad = result.unparseable
    if bad:
        result.problems.append(
            f"{len(bad)} judgment(s) could not be read as yes or no and count as no"
        )
    measure(result, scenario, memories, clock)
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


def measure(
    result: SocietyResult,
    scenario: ScenarioSpec,
    memories: Mapping[str, Sequence[MemoryRow]],
    clock: datetime,
) -> None:
    """Diffusion, the relationship graph at the start and the end, and the curves over time."""
    names = result.residents
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

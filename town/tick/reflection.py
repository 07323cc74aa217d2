"""Reflection (Park et al., section 4.2): questions from recent memories, insights that cite them.

1. The 100 most recent memories -> the 3 most salient high-level questions.
2. Each question is a retrieval query (reflections included); the retrieved memories, numbered by
   their ids, -> up to 5 insights a question, each citing the ids that support it and rated for
   importance. One call asks for the insights of all three questions and their importance: the
   paper's five calls (three insight prompts, two ratings) cost one here.
3. New insights (repeating neither each other nor recent memories) are stored as reflection
   memories with those ids as ``cites``.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from town.llm.port import Brain
from town.llm.schemas import (
    Insight,
    NumberedStatement,
    QuestionStatements,
    ReflectInsightsInput,
    ReflectQuestionsInput,
)
from town.llm.tasks import REFLECT_INSIGHTS, REFLECT_QUESTIONS
from town.memory.stream import MemoryStream, NewMemory
from town.store.models import Memory


async def reflect(
    brain: Brain,
    stream: MemoryStream,
    session: Session,
    resident: str,
    now: datetime,
    *,
    recent: int = 100,
    per_question: int = 10,
) -> list[Memory]:
    """Run one whole reflection for ``resident``; returns the stored reflection memories.

    The engine runs the same three steps one tick apart (``ask``, ``insights``, ``store``), so a
    reflection never adds more than one LLM call to a tick's chain (``store`` makes none)."""
    questions = await ask(brain, stream, session, resident, recent=recent)
    found = await insights(brain, stream, session, resident, questions, now, recent, per_question)
    return await store(stream, session, found, now)


async def ask(
    brain: Brain, stream: MemoryStream, session: Session, resident: str, *, recent: int = 100
) -> list[str]:
    """Step 1: the three most salient questions about the latest memories."""
    latest = stream.recent(session, recent)
    if not latest:
        return []
    asked = await brain.run(
        REFLECT_QUESTIONS,
        ReflectQuestionsInput(resident=resident, statements=latest),
        resident=resident,
    )
    return list(asked.questions[:3])


async def insights(
    brain: Brain,
    stream: MemoryStream,
    session: Session,
    resident: str,
    questions: list[str],
    now: datetime,
    recent: int = 100,
    per_question: int = 10,
) -> list[Insight]:
    """Step 2: insights for every question in one call, each citing the memories retrieved for
    its question; insights that repeat each other or a recent memory are dropped."""
    groups = []
    retrieved = await stream.recall_each(session, questions, now, k=per_question)
    for question, found in zip(questions, retrieved, strict=True):
        statements = [
            NumberedStatement(id=r.memory.id, text=r.memory.text)
            for r in found
            if r.memory.id is not None
        ]
        if statements:
            groups.append(QuestionStatements(question=question, statements=statements))
    if not groups:
        return []
    answer = await brain.run(
        REFLECT_INSIGHTS,
        ReflectInsightsInput(resident=resident, questions=groups),
        resident=resident,
    )
    known = {_key(text) for text in stream.recent(session, recent)}
    unique: dict[str, Insight] = {}
    for insight in answer.insights:
        key = _key(insight.text)
        if key and key not in known and key not in unique:
            unique[key] = insight
    return list(unique.values())


async def store(
    stream: MemoryStream, session: Session, found: list[Insight], now: datetime
) -> list[Memory]:
    """Step 3: the insights as reflections, with the importance the insights call gave them."""
    return await stream.record(session, as_memories(found), now)


def as_memories(found: list[Insight]) -> list[NewMemory]:
    return [NewMemory("reflection", i.text, i.importance, cites=i.cites) for i in found]


def _key(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".")

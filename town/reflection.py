"""Reflection (Park et al., section 4.2): questions from recent memories, insights that cite them.

1. The 100 most recent memories -> the 3 most salient high-level questions.
2. Each question is a retrieval query (reflections included); the retrieved memories, numbered by
   their ids, -> up to 5 insights, each citing the ids that support it and rated for importance
   in the same call (one call fewer per reflection than rating them apart). The insight calls
   for the three questions run concurrently.
3. New insights (repeating neither each other nor recent memories) are stored as reflection
   memories with those ids as ``cites``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from sqlmodel import Session

from town.llm.port import Brain
from town.llm.schemas import (
    Insight,
    NumberedStatement,
    ReflectInsightsInput,
    ReflectQuestionsInput,
)
from town.llm.tasks import REFLECT_INSIGHTS, REFLECT_QUESTIONS
from town.memory import MemoryStream, NewMemory
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
        ReflectQuestionsInput(resident=resident, statements=[m.text for m in latest]),
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
    """Step 2: for each question (concurrently), insights citing the memories retrieved for it;
    insights that repeat each other or a recent memory are dropped."""
    batches = []
    retrieved = await stream.recall_each(session, questions, now, k=per_question)
    for question, found in zip(questions, retrieved, strict=True):
        statements = [
            NumberedStatement(id=r.memory.id, text=r.memory.text)
            for r in found
            if r.memory.id is not None
        ]
        if statements:
            batches.append(
                ReflectInsightsInput(resident=resident, question=question, statements=statements)
            )
    answers = await asyncio.gather(
        *(brain.run(REFLECT_INSIGHTS, batch, resident=resident) for batch in batches)
    )
    known = {_key(m.text) for m in stream.recent(session, recent)}
    unique: dict[str, Insight] = {}
    for answer in answers:
        for insight in answer.insights:
            key = _key(insight.text)
            if key and key not in known and key not in unique:
                unique[key] = insight
    return list(unique.values())


async def store(
    stream: MemoryStream, session: Session, found: list[Insight], now: datetime
) -> list[Memory]:
    """Step 3: the insights as reflections, with the importance the insights call gave them."""
    return await stream.record(
        session, [NewMemory("reflection", i.text, i.importance, cites=i.cites) for i in found], now
    )


def _key(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".")

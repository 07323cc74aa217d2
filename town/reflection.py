"""Reflection (Park et al., section 4.2): questions from recent memories, insights that cite them.

1. The 100 most recent memories -> the 3 most salient high-level questions.
2. Each question is a retrieval query (reflections included); the retrieved memories, numbered by
   their ids, -> up to 5 insights, each citing the ids that support it.
3. New insights (repeating neither each other nor recent memories) are stored as reflection
   memories with those ids as ``cites``; their importance is rated in one batched call. The
   insight calls for the three questions run concurrently.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from sqlmodel import Session

from town.llm.port import Brain
from town.llm.schemas import (
    Insight,
    NumberedStatement,
    RateImportanceInput,
    ReflectInsightsInput,
    ReflectQuestionsInput,
)
from town.llm.tasks import RATE_IMPORTANCE, REFLECT_INSIGHTS, REFLECT_QUESTIONS
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
    """Run one reflection for ``resident``; returns the stored reflection memories."""
    latest = stream.recent(session, recent)
    if not latest:
        return []
    asked = await brain.run(
        REFLECT_QUESTIONS,
        ReflectQuestionsInput(resident=resident, statements=[m.text for m in latest]),
        resident=resident,
    )
    batches = []
    for question in asked.questions[:3]:
        found = await stream.recall(session, question, now, k=per_question)
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
    known = {_key(m.text) for m in latest}
    unique: dict[str, Insight] = {}
    for answer in answers:
        for insight in answer.insights:
            key = _key(insight.text)
            if key and key not in known and key not in unique:
                unique[key] = insight
    insights = list(unique.values())
    if not insights:
        return []
    rated = await brain.run(
        RATE_IMPORTANCE,
        RateImportanceInput(resident=resident, observations=[i.text for i in insights]),
        resident=resident,
    )
    scores = list(rated.scores) + [5] * (len(insights) - len(rated.scores))
    return await stream.record(
        session,
        [
            NewMemory("reflection", i.text, score, cites=i.cites)
            for i, score in zip(insights, scores, strict=False)
        ],
        now,
    )


def _key(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".")

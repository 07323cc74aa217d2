"""Reflection: three questions, retrieval per question, insights stored with their citations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlmodel import select

from tests.factories import ResidentFactory
from tests.fakes.brain import ScriptedBrain
from town.llm.embedders import HashEmbedder
from town.memory.stream import MemoryStream, NewMemory
from town.memory.vectors import InMemoryIndex
from town.store.db import Store
from town.store.models import Memory
from town.tick.reflection import reflect

T0 = datetime(2023, 2, 13, 8, tzinfo=UTC)


def klaus_remembering(store: Store, resident_factory: ResidentFactory) -> MemoryStream:
    """Klaus Mueller, in a town of his own, with four memories of his research and his day."""
    res = resident_factory("Klaus Mueller")
    assert res.id is not None
    with store.session() as s:
        stream = MemoryStream(resident_id=res.id, embedder=HashEmbedder(64), index=InMemoryIndex())
        stream.add(
            s,
            [
                NewMemory("observation", "Klaus is reading a book on gentrification", 5),
                NewMemory("observation", "Klaus is writing his research paper", 6),
                NewMemory("chat", "Klaus told Maria about his research on gentrification", 5),
                NewMemory("observation", "the library is quiet this morning", 2),
            ],
            T0,
        )
    return stream


async def test_reflection_stores_insights_with_citations(
    store: Store, resident_factory: ResidentFactory
) -> None:
    stream = klaus_remembering(store, resident_factory)
    brain = ScriptedBrain()
    brain.enqueue(
        "reflect_questions",
        {
            "questions": [
                "What is Klaus working on?",
                "Who does Klaus talk to?",
                "What does Klaus care about?",
            ]
        },
    )
    brain.enqueue(
        "reflect_insights",
        {
            "insights": [
                {
                    "text": "Klaus is dedicated to his research on gentrification",
                    "cites": [1, 2, 3],
                    "importance": 8,
                },
                {"text": "Klaus shares his research with Maria", "cites": [3], "importance": 6},
                {"text": "Klaus is dedicated to his research on gentrification.", "cites": [2]},
            ]
        },
    )
    now = T0 + timedelta(hours=2)
    with store.session() as s:
        stored = await reflect(brain, stream, s, "Klaus Mueller", now)
    assert [m.text for m in stored] == [
        "Klaus is dedicated to his research on gentrification",
        "Klaus shares his research with Maria",
    ]  # the repeated insight is stored once
    assert [m.cites for m in stored] == [[1, 2, 3], [3]]
    assert [m.importance for m in stored] == [8, 6]  # rated in the insights call: no other
    assert brain.calls("rate_importance") == []
    # the 100 most recent memories went to the questions; each question was a retrieval query
    (questions_call,) = brain.calls("reflect_questions")
    assert len(questions_call.inputs.statements) == 4
    (insight_call,) = brain.calls("reflect_insights")  # one call for the three questions
    assert [g.question for g in insight_call.inputs.questions] == [
        "What is Klaus working on?",
        "Who does Klaus talk to?",
        "What does Klaus care about?",
    ]
    assert all(st.id in {1, 2, 3, 4} for g in insight_call.inputs.questions for st in g.statements)
    with store.session() as s:
        kinds = [m.kind for m in s.exec(select(Memory).order_by(Memory.id)).all()]  # type: ignore[arg-type]
    assert kinds.count("reflection") == 2


async def test_reflections_can_cite_reflections(
    store: Store, resident_factory: ResidentFactory
) -> None:
    stream = klaus_remembering(store, resident_factory)
    brain = ScriptedBrain()
    with store.session() as s:
        first = await reflect(brain, stream, s, "Klaus Mueller", T0 + timedelta(hours=1))
    assert first, "the offline brain reflects on these memories"
    assert all(m.kind == "reflection" and m.cites for m in first)
    reflection_ids = {m.id for m in first}
    brain.enqueue("reflect_questions", {"questions": ["What drives Klaus?"]})
    brain.enqueue(
        "reflect_insights",
        {
            "insights": [
                {
                    "text": "Klaus's research gives his days their shape",
                    "cites": sorted(reflection_ids),
                }
            ]
        },
    )
    with store.session() as s:
        second = await reflect(brain, stream, s, "Klaus Mueller", T0 + timedelta(hours=3))
    assert second[0].cites == sorted(reflection_ids)
    (group,) = brain.calls("reflect_insights")[-1].inputs.questions
    assert reflection_ids & {st.id for st in group.statements}  # retrieval saw the reflections


async def test_nothing_to_reflect_on(store: Store) -> None:
    stream = MemoryStream(resident_id=1, embedder=HashEmbedder(8), index=InMemoryIndex())
    brain = ScriptedBrain()
    with store.session() as s:
        assert await reflect(brain, stream, s, "Nobody", T0) == []
    assert brain.history == []

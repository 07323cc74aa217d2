"""A private interview: a question to a resident that changes nothing in the town.

It answers from a snapshot (the resident's row and what it recalls, read without the engine's
lock, its memories' last access left alone), asks the LLM with nothing held, and writes only its
audit rows, in one short unit of work. What only reads (the map, cards, ``look``, ``where``)
lives in ``town/views``, beside this package."""

from __future__ import annotations

from collections.abc import Collection

from town.inputs.unit import find_resident, input_unit
from town.llm.schemas import InterviewInput
from town.llm.tasks import INTERVIEW
from town.outbox import audit
from town.text import clean_text, name_of
from town.tick.engine import Engine
from town.world.gametime import hhmm, spoken_day
from town.world.places import World


async def interview(
    engine: Engine,
    resident: str,
    question: str,
    asker: str = "",
    kinds: Collection[str] | None = None,
    *,
    platform: str = "",
    user_id: str = "",
) -> str:
    """A private question: answered from retrieved memories; nothing changes in the town.
    ``kinds`` limits the memory kinds retrieval may see (the paper's ablations; ``None`` is all
    of them, an empty collection none). The question and the answer go to the audit log
    (``platform`` and ``user_id`` name the asker there, never to the LLM)."""
    words = clean_text(question)
    if not words:
        raise ValueError("ask what? the question is empty")
    with engine.store.session() as session:  # (a read: no lock, nothing written)
        row = find_resident(engine.residents(session), resident)
        assert row.id is not None
        stream = engine.streams(row.id)
        clock = engine.town(session).clock
        found = await stream.recall(session, words, clock, k=10, kinds=kinds, touch=False)
    answer = await engine.brain.run(
        INTERVIEW,
        InterviewInput(
            resident=row.name,
            # the hour, as a visitor's talk has it: what is over is told as over
            summary=f"{row.summary} It is {spoken_day(clock.date())}, {hhmm(clock)}.",
            # a private memory is never told to someone asking (a visitor, an admin)
            memories=[r.memory.text for r in found if not (asker and r.memory.private)],
            question=words,
            asker=clean_text(asker, 200) or None,
        ),
        resident=row.name,
    )
    area = World.area_of(row.location)
    asked = audit.identity(name_of(asker), platform, user_id)
    put = f"{row.name}: {words}"
    async with input_unit(engine, changes_town=False) as unit:
        unit.audit(audit.IN, "interview", asked, put, platform=platform, channel=area)
        unit.audit(audit.OUT, "answer", row.name, answer.answer, platform=platform, channel=area)
    return answer.answer

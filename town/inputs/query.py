"""Questions to a town that change nothing in it: a private interview, a look at a place, who is
where."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from town.inputs.unit import area_named, clean_text, input_unit
from town.llm.schemas import InterviewInput
from town.llm.tasks import INTERVIEW
from town.outbox import audit
from town.tick.engine import Engine
from town.tick.state import ResidentState
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
    """A private question: answered from retrieved memories; nothing changes in the town but the
    memories' last-access times. ``kinds`` limits the memory kinds retrieval may see (the paper's
    ablations; ``None`` is all of them, an empty collection none). The question and the answer
    go to the audit log (``platform`` and ``user_id`` name the asker there, never to the LLM)."""
    words = clean_text(question)
    if not words:
        raise ValueError("ask what? the question is empty")
    async with input_unit(engine, changes_town=False) as unit:
        row = unit.resident(resident)
        assert row.id is not None
        stream = engine.streams(row.id)
        found = await stream.recall(unit.session, words, unit.clock, k=10, kinds=kinds)
        answer = await engine.brain.run(
            INTERVIEW,
            InterviewInput(
                resident=row.name,
                summary=row.summary,
                # a private memory is never told to someone asking (a visitor, an admin)
                memories=[r.memory.text for r in found if not (asker and r.memory.private)],
                question=words,
                asker=clean_text(asker, 200) or None,
            ),
            resident=row.name,
        )
        area = World.area_of(row.location)
        asked = audit.identity(asker, platform, user_id)
        put = f"{row.name}: {words}"
        unit.audit(audit.IN, "interview", asked, put, platform=platform, channel=area)
        unit.audit(audit.OUT, "answer", row.name, answer.answer, platform=platform, channel=area)
    return answer.answer


@dataclass(frozen=True)
class Whereabouts:
    clock: datetime
    paused: bool
    minutes_per_tick: int
    by_area: dict[str, list[tuple[str, str, bool]]]  # area -> [(resident, action, awake)]


async def whereabouts(engine: Engine) -> Whereabouts:
    """Who is where and doing what, with the town's clock."""
    async with input_unit(engine, changes_town=False) as unit:
        by_area: dict[str, list[tuple[str, str, bool]]] = {}
        for row in engine.residents(unit.session).values():
            awake = ResidentState.of(row).awake
            by_area.setdefault(World.area_of(row.location), []).append(
                (row.name, row.action, awake)
            )
        town = unit.town
    return Whereabouts(town.clock, town.paused, town.minutes_per_tick, by_area)


async def look(engine: Engine, location: str) -> str:
    """A place as a visitor sees it now: what it is, if it is open, its objects, who is there."""
    async with input_unit(engine, changes_town=False) as unit:
        world = World.load(unit.session, engine.town_id, engine.spec)
        area = area_named(world, location)
        clock = unit.clock
        spec = world.spec.area(area)
        lines = [f"{area}: {spec.description}" if spec.description else area]
        if spec.opens and spec.closes:
            state = "open" if world.is_open(area, clock) else "closed"
            lines.append(f"Open {spec.opens}-{spec.closes}; now ({clock:%H:%M}) it is {state}.")
        for place, name, obj_state in world.objects_in(area):
            lines.append(f"- {place.split(': ', 1)[-1]}: the {name} is {obj_state}")
        here = [
            (r.name, r.action, ResidentState.of(r).awake)
            for r in engine.residents(unit.session).values()
            if World.area_of(r.location) == area
        ]
    if not here:
        lines.append("Nobody is here.")
    for name, action, awake in here:
        lines.append(f"{name} is {action if awake else 'asleep'}.")
    return "\n".join(lines)

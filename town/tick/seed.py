"""Founding a town in the store from its persona data."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime

from sqlmodel import Session, select

from town.llm.port import Brain
from town.llm.schemas import RateImportanceInput
from town.llm.tasks import RATE_IMPORTANCE
from town.memory.stream import MemoryStream, NewMemory
from town.store.models import Location, Resident, Town, WorldObject
from town.tick.mind import warm_before_waking
from town.tick.state import ResidentState
from town.world.persona import ResidentSpec, TownSpec


class TownExists(ValueError):
    """A town of that name is in the store already."""


async def found_town(
    session: Session,
    spec: TownSpec,
    name: str,
    brain: Brain,
    streams: Callable[[int], MemoryStream],
    *,
    persona: str,
    start: datetime | None = None,
    minutes_per_tick: int | None = None,
) -> Town:
    """Create the town: places, objects, residents asleep at home, and their seed memories (with
    the summary queries of those who wake in its first hour, embedded ahead).

    Each resident's seed paragraph gives one memory per phrase (scenario facts included), and
    its private paragraph one private memory per phrase; their importance is rated in one call
    per resident, all residents at once.
    """
    if session.exec(select(Town).where(Town.name == name)).first() is not None:
        raise TownExists(f"a town named {name!r} exists already")
    clock = start or spec.scenario.start
    town = Town(
        name=name,
        scenario=persona[:80],  # the persona folder, to load the spec again
        clock=clock,
        minutes_per_tick=minutes_per_tick or spec.scenario.minutes_per_tick,
    )
    session.add(town)
    session.flush()
    assert town.id is not None
    for area in spec.areas:
        session.add(
            Location(
                town_id=town.id,
                path=area.name,
                description=area.description,
                rules=list(area.rules),
            )
        )
        for sub in area.sub_areas:
            session.add(Location(town_id=town.id, path=f"{area.name}: {sub.name}"))
    for place, obj in spec.objects():
        session.add(WorldObject(town_id=town.id, location=place, name=obj.name, state=obj.state))
    residents: list[tuple[Resident, ResidentSpec, ResidentState, list[tuple[str, bool]]]] = []
    for person in spec.residents:
        state = ResidentState(known=dict.fromkeys(person.known_places, clock.isoformat()))
        row = Resident(
            town_id=town.id,
            name=person.name,
            persona=person.model_dump(mode="json"),
            location=person.home,
            action="sleeping",
            emoji="😴",
            state=state.model_dump(mode="json"),
        )
        session.add(row)
        phrases = [(p, False) for p in person.seed_phrases(spec.scenario)]
        residents.append(
            (row, person, state, phrases + [(p, True) for p in person.private_phrases()])
        )
    session.flush()
    rated = await asyncio.gather(
        *(
            brain.run(
                RATE_IMPORTANCE,
                RateImportanceInput(resident=row.name, observations=[p for p, _ in phrases]),
                resident=row.name,
            )
            for row, _, _, phrases in residents
        )
    )
    for (row, person, state, phrases), scores in zip(residents, rated, strict=True):
        assert row.id is not None
        padded = list(scores.scores) + [5] * (len(phrases) - len(scores.scores))
        stream = streams(row.id)
        seeds = [
            NewMemory("seed", p, n, private=private)
            for (p, private), n in zip(phrases, padded, strict=False)
        ]
        await stream.record(session, seeds, clock)
        warm_before_waking(stream, row, person, state, clock)
    return town

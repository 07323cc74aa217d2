"""Founding a town in the store from its persona data."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime

from sqlmodel import Session, select

from town.llm.port import Brain
from town.llm.schemas import RateImportanceInput, RateImportanceResult
from town.llm.tasks import RATE_IMPORTANCE
from town.memory.stream import MemoryStream, NewMemory
from town.store.db import Store
from town.store.models import Location, Resident, Town, WorldObject
from town.tick.mind import warm_before_waking
from town.tick.state import ResidentState
from town.world.persona import Area, ResidentSpec, TownSpec, WorldObjectSpec


class TownExists(ValueError):
    """A town of that name is in the store already."""


async def found_town(
    store: Store,
    spec: TownSpec,
    name: str,
    brain: Brain,
    streams: Callable[[int], MemoryStream],
    *,
    persona: str,
    start: datetime | None = None,
    minutes_per_tick: int | None = None,
    rated: Callable[[int, int], None] | None = None,
) -> Town:
    """Create the town: places, objects, residents asleep at home, and their seed memories (with
    the summary queries of those who wake in its first hour, embedded ahead).

    Each resident's seed paragraph gives one memory per phrase (scenario facts included), and
    its private paragraph one private memory per phrase; their importance is rated in one call
    per resident, all residents at once, holding nothing (another town in the same database
    goes on writing meanwhile), then the town is written in one unit of work.
    """
    with store.session() as session:  # (a read: taken again in the write)
        _not_taken(session, name)
    people = [(person, seeds_of(person, spec)) for person in spec.residents]
    scores = await rate_seeds(
        brain, [(p.name, [text for text, _ in seeds]) for p, seeds in people], rated
    )
    clock = start or spec.scenario.start
    with store.session() as session:
        _not_taken(session, name)  # (founded by another process while the seeds were rated)
        town = Town(
            name=name,
            scenario=persona,  # the persona folder, to load the spec again
            clock=clock,
            minutes_per_tick=minutes_per_tick or spec.scenario.minutes_per_tick,
            applied_persona=spec.model_dump(mode="json"),  # edits to the folder wait for an update
        )
        session.add(town)
        session.flush()
        assert town.id is not None
        add_places(session, town.id, spec.areas)
        await settle(session, town.id, clock, people, scores, streams)
    return town


def _not_taken(session: Session, name: str) -> None:
    if session.exec(select(Town).where(Town.name == name)).first() is not None:
        raise TownExists(f"a town named {name!r} exists already")


Seeds = list[tuple[str, bool]]  # (phrase, private)


def seeds_of(person: ResidentSpec, spec: TownSpec) -> Seeds:
    """A resident's seed phrases (scenario facts included), then its private ones."""
    return [(p, False) for p in person.seed_phrases(spec.scenario)] + [
        (p, True) for p in person.private_phrases()
    ]


def add_places(
    session: Session, town_id: int, areas: list[Area], *, only: set[str] | None = None
) -> None:
    """The places' rows and their objects' (``only``: just these paths, areas or sub-areas)."""
    for area in areas:
        if only is None or area.name in only:
            session.add(
                Location(
                    town_id=town_id,
                    path=area.name,
                    description=area.description,
                    rules=list(area.rules),
                )
            )
        for sub in area.sub_areas:
            path = f"{area.name}: {sub.name}"
            if only is None or path in only or area.name in only:
                session.add(Location(town_id=town_id, path=path))
                for obj in sub.objects:
                    session.add(
                        WorldObject(town_id=town_id, location=path, name=obj.name, state=obj.state)
                    )


def add_objects(session: Session, town_id: int, objects: list[tuple[str, WorldObjectSpec]]) -> None:
    for place, obj in objects:
        session.add(WorldObject(town_id=town_id, location=place, name=obj.name, state=obj.state))


async def rate_seeds(
    brain: Brain,
    people: list[tuple[str, list[str]]],
    shown: Callable[[int, int], None] | None = None,
) -> list[list[int]]:
    """The importance of each resident's seed phrases: one call per resident, all at once,
    each one ``shown`` as it is rated (residents rated, of how many).
    (No session is open meanwhile: a live town's writers are never held by it.)"""
    asked = [(name, phrases) for name, phrases in people if phrases]
    done = 0

    async def rate(name: str, phrases: list[str]) -> RateImportanceResult:
        nonlocal done
        scores = await brain.run(
            RATE_IMPORTANCE, RateImportanceInput(resident=name, observations=phrases), resident=name
        )
        done += 1
        if shown is not None:
            shown(done, len(asked))
        return scores

    rated = await asyncio.gather(*(rate(name, phrases) for name, phrases in asked))
    scores = iter(rated)
    found = []
    for _, phrases in people:
        given = list(next(scores).scores) if phrases else []
        found.append(given + [5] * (len(phrases) - len(given)))
    return found


async def settle(
    session: Session,
    town_id: int,
    clock: datetime,
    people: list[tuple[ResidentSpec, Seeds]],
    rated: list[list[int]],
    streams: Callable[[int], MemoryStream],
) -> list[Resident]:
    """New residents asleep at home, with their seed memories (``people``' phrases, ``rated``):
    founding, or moving into a living town, where they plan their day when they next wake."""
    rows: list[tuple[Resident, ResidentSpec, ResidentState]] = []
    for person, _ in people:
        state = ResidentState(known=dict.fromkeys(person.known_places, clock.isoformat()))
        row = Resident(
            town_id=town_id,
            name=person.name,
            persona=person.model_dump(mode="json"),
            location=person.home,
            action="sleeping",
            emoji="😴",
            state=state.model_dump(mode="json"),
        )
        session.add(row)
        rows.append((row, person, state))
    session.flush()
    for (row, person, state), (_, phrases), scores in zip(rows, people, rated, strict=True):
        assert row.id is not None
        seeds = [
            NewMemory("seed", p, n, private=private)
            for (p, private), n in zip(phrases, scores, strict=True)
        ]
        stream = streams(row.id)
        await stream.record(session, seeds, clock)
        warm_before_waking(stream, row, person, state, clock)
    return [row for row, _, _ in rows]

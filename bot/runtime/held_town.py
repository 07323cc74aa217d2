"""A town a worker runs under its lease, opened over the worker's shared services, or founded
from the persona folder ``--towns`` names."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from sqlalchemy.exc import IntegrityError

from bot.runtime.consent import moderated
from bot.runtime.settings import Settings
from bot.runtime.towns import OpenTown
from bot.runtime.wiring import Services, build_brain
from town.authoring.living import town_spec
from town.features.coaching.room import plug_in
from town.store.lease import Lease
from town.store.models import Town
from town.tick.engine import Engine
from town.tick.seed import TownExists, found_town
from town.world.load import load_town

log = logging.getLogger(__name__)


@dataclass
class HeldTown:
    """A town this worker runs under its lease."""

    town_id: int
    name: str
    lease: Lease
    task: asyncio.Task[None]
    renewed: float  # time.monotonic() when the last renewal that got through was sent
    lost: asyncio.Event  # set when a tick's guard found the lease gone
    why_lost: list[str]  # what the guard said, told before the tick's task ends


def own_streams(shared: Services) -> Services:
    """The worker's store, embedder, index and executor, with memory streams of their own."""
    return Services(
        shared.settings, shared.store, shared.embedder, shared.index, executor=shared.executor
    )


def open_held_town(
    shared: Services, settings: Settings, town_id: int, tick_lock: asyncio.Lock | None
) -> OpenTown:
    """The town with memory streams of its own over the worker's store and index (a town that
    comes back after another worker ran it starts from what is stored)."""
    with shared.store.session() as s:
        town = s.get(Town, town_id)
    if town is None:
        raise LookupError(f"town #{town_id} is gone")
    folder = town.scenario or town.name
    spec = town_spec(town)  # as the last live update applied it, else the folder
    services = own_streams(shared)
    brain, handles, usage = build_brain(
        settings, shared.store, town_id, shared.embedder, shared.servers
    )
    brain = moderated(brain, settings, folder, shared.store, town_id)
    engine = Engine(
        shared.store,
        spec,
        brain,
        services.stream,
        town_id,
        after_commit=usage.flush,
        llm=handles,
    )
    if tick_lock is not None:
        engine.lock = tick_lock
    plug_in(engine, folder)  # the mock interview, in a town with interview rooms
    return OpenTown(services, engine, usage, town)


async def found_named_town(shared: Services, settings: Settings, name: str) -> Town | None:
    """Found the town ``name`` from the persona folder of the same name; None when another
    worker founded it first (the unique town name settles the race). A folder that cannot be
    loaded raises ``PersonaError``."""
    services = own_streams(shared)
    try:
        spec = load_town(name)
        brain, _handles, usage = build_brain(settings, shared.store, None, servers=shared.servers)
        town = await found_town(shared.store, spec, name, brain, services.stream, persona=name)
        assert town.id is not None
        usage.founded(town.id)  # the founding's calls count against the town's budget
        usage.flush()
    except (TownExists, IntegrityError):
        return None
    log.info("founded town %r from the persona folder %r", name, name)
    return town


def how_it_ended(task: asyncio.Task[None]) -> str:
    if task.cancelled():
        return "it was cancelled"
    error = task.exception()
    return f"it stopped: {error!r}" if error else "it stopped"

"""The engine: a tick advances the clock and runs every resident, all in one transaction.

1. The clock moves on by ``minutes_per_tick``.
2. Every awake resident perceives its area from the tick's starting snapshot (no LLM call).
3. All residents think concurrently: wake and plan, sleep, rate and react to what is new, or
   follow the plan (decomposing only what is due). Residents with nothing new make no call.
4. The conversations started in step 3 run concurrently, turn by turn.
5. Residents whose summed importance passed the threshold reflect, concurrently.
6. State, memories, plans, object states and the tick's town events (the outbox) commit together;
   an exception anywhere rolls the whole tick back, clock included.

Every change to a town goes through one engine at a time (its lock), so a tick's transaction is
the only writer while it awaits the LLM.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session, select

from town.depth import chained
from town.dialogue import converse
from town.events import TownEvent, write_outbox
from town.llm.port import Brain
from town.memory import MemoryStream
from town.mind import Tick, perceive, think
from town.persona import ResidentSpec, TownSpec
from town.reflection import reflect
from town.state import ResidentState
from town.store.db import Store
from town.store.models import Resident, Town
from town.world import World

REFLECT_THRESHOLD = 35  # summed importance; see ARCHITECTURE.md on why not the paper's 150


class TownNotFound(LookupError):
    """No such town in the store."""


@dataclass
class TickReport:
    clock: datetime
    events: list[TownEvent] = field(default_factory=list)
    skipped: bool = False  # paused
    chain: int = 0  # longest chain of dependent LLM calls (see town/depth.py)


@dataclass
class Engine:
    store: Store
    spec: TownSpec
    brain: Brain
    streams: Callable[[int], MemoryStream]
    town_id: int
    reflect_threshold: int = REFLECT_THRESHOLD
    after_commit: Callable[[], None] | None = None  # e.g. flush the LLM usage tally
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def specs(self) -> dict[str, ResidentSpec]:
        return {r.name: r for r in self.spec.residents}

    def town(self, session: Session) -> Town:
        town = session.get(Town, self.town_id)
        if town is None:
            raise TownNotFound(f"town #{self.town_id} is not in the store")
        return town

    def residents(self, session: Session) -> dict[str, Resident]:
        rows = session.exec(
            select(Resident).where(Resident.town_id == self.town_id).order_by(Resident.id)  # type: ignore[arg-type]
        ).all()
        return {r.name: r for r in rows}

    async def tick(self, *, force: bool = False) -> TickReport:
        """Advance the town by one tick (a paused town does not move unless ``force``)."""
        async with self.lock:
            with self.store.session() as session:
                town = self.town(session)
                if town.paused and not force:
                    return TickReport(town.clock, skipped=True)
                now = town.clock + timedelta(minutes=town.minutes_per_tick)
                tick = self.new_tick(session, now)
                chain = await self._run(tick)
                town.clock = now
                session.add(town)
                write_outbox(session, self.town_id, now.isoformat(), tick.events)
            if self.after_commit:
                self.after_commit()
            return TickReport(now, tick.events, chain=chain)

    def new_tick(self, session: Session, now: datetime) -> Tick:
        residents = self.residents(session)
        specs = self.specs()
        tick = Tick(
            session=session,
            now=now,
            world=World.load(session, self.town_id, self.spec),
            brain=self.brain,
            streams=self.streams,
            residents={n: r for n, r in residents.items() if n in specs},
            specs=specs,
        )
        for name, row in tick.residents.items():
            tick.start[name] = (row.location, row.action, ResidentState.of(row).awake)
        return tick

    async def _run(self, tick: Tick) -> int:
        """The tick's phases; returns its longest chain of dependent LLM calls."""
        observed = {}
        for name, row in tick.residents.items():
            state = ResidentState.of(row)
            observed[name] = perceive(tick, row, state) if state.awake else []
            state.save(row)
        chain = await _longest(think(tick, r, observed[n]) for n, r in tick.residents.items())
        busy: set[str] = set()
        pairs = []
        for a, b in tick.talks:
            if a not in busy and b not in busy:
                busy |= {a, b}
                pairs.append((tick.residents[a], tick.residents[b]))
        chain += await _longest(converse(tick, a, b) for a, b in pairs)
        chain += await _longest(self._maybe_reflect(tick, r) for r in tick.residents.values())
        for row in tick.residents.values():
            tick.session.add(row)
        return chain

    async def _maybe_reflect(self, tick: Tick, resident: Resident) -> None:
        state = ResidentState.of(resident)
        if not state.awake or state.since_reflection < self.reflect_threshold:
            return
        stored = await reflect(
            tick.brain, tick.stream(resident), tick.session, resident.name, tick.now
        )
        state.since_reflection = 0
        state.save(resident)
        tick.emit(
            "reflected", resident, f"{resident.name} reflected", insights=[m.text for m in stored]
        )


async def _longest(units: Iterable[Coroutine[Any, Any, object]]) -> int:
    """Run units of work concurrently; the longest chain of LLM calls among them."""
    done = await asyncio.gather(*(chained(unit) for unit in units))
    return max((length for _, length in done), default=0)

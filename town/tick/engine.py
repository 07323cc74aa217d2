"""The engine: a tick reads a snapshot, thinks with nothing held, and writes once.

1. Snapshot, one short read: the clock moves on by ``minutes_per_tick`` (in the tick's hands);
   the residents, the world, today's plan items, the conversations going on and the memory
   arrays are read; what visitors said since the last tick reaches the inboxes of the residents
   there (``town/tick/heard.py``), and so do the inputs waiting for this tick (an inner voice,
   an interview room's change to its interviewer: ``town/tick/pending.py``).
   The read ends: no connection is held from here to the write.
2. Thinking (``Store.thinking``: any SQL now raises): every awake resident perceives its area
   from the snapshot, then one concurrent gather of every unit of work, each at most one LLM
   call deep: each resident's next step (wake, plan, react, change an object, or follow the
   plan, decomposing only what is due) beside rating what it perceived; one turn of each
   conversation; one step of each reflection. What follows from a step waits for the next tick,
   in ``ResidentState``. The conversations asked for begin (their first words come next tick).
   New rows wait in the session with ids made in Python (``town/store/ids.py``).
3. One write, under the engine's lock (this process's writers, one at a time): the town's
   revision is raised if no other process's tick raised it since the snapshot (else
   ``TownChanged`` and everything rolls back), then states, memories, plans, object states and
   the tick's town events (the outbox) commit together; an exception anywhere rolls the whole
   tick back, clock included.

Inputs never wait for a thinking tick and never make it think again: they are written at once
and raise no revision (``town/inputs/admin.py`` says how each meets a tick), and reads take no
lock (``town/views``). Only a unit that writes a resident's row raises the revision
(``Engine.unit(changes_town=True)``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, TypeVar

from sqlmodel import Session, col, select, update

from town.llm.chain import Handles
from town.llm.depth import chained
from town.llm.port import Brain
from town.llm.schemas import Insight
from town.memory.stream import MemoryStream
from town.outbox.events import TownEvent, write_outbox
from town.store.db import Store
from town.store.ids import blocks
from town.store.models import Conversation, PlanItem, Resident, Town
from town.tick import dialogue, heard, reflection
from town.tick.mind import may_begin, think
from town.tick.pending import take_pending
from town.tick.perceive import Observation, perceive
from town.tick.plain_answers import PlainAnswers
from town.tick.turn import Tick
from town.world.persona import MOVED_AWAY, ResidentSpec, TownSpec
from town.world.places import World

REFLECT_THRESHOLD = 35  # summed importance; see ARCHITECTURE.md on why not the paper's 150
INPUT_ATTEMPTS = 3  # an input another process overtook runs again, up to this many times in all
# A tick's phases (``Engine.phase``), in order; COMMITTED is told once its write has committed
READING, THINKING, WRITING, COMMITTED = "reading", "thinking", "writing", "committed"

log = logging.getLogger(__name__)
T = TypeVar("T")


class TownNotFound(LookupError):
    """No such town in the store."""


class TownChanged(RuntimeError):
    """Another process changed the town (an input, or a tick) after this tick or unit of work
    read it: it rolled back rather than write over that change. Run it again.

    In one process the engine's lock keeps ticks and inputs apart; across processes this check
    does (on PostgreSQL nothing else would)."""

    def __init__(self, town_id: int) -> None:
        super().__init__(
            f"town #{town_id} was changed by another process meanwhile; nothing was saved, "
            "try again"
        )


async def until_unchanged(act: Callable[[], Awaitable[T]], attempts: int = INPUT_ATTEMPTS) -> T:
    """``act()`` (an input: one unit of work), run again while another process overtakes it,
    up to ``attempts`` times in all. An overtaken unit rolled back whole (:class:`TownChanged`),
    so running it again from the start loses and doubles nothing; the last attempt's
    ``TownChanged`` is raised."""
    attempt = 1
    while True:
        try:
            return await act()
        except TownChanged:
            if attempt >= attempts:
                raise
            attempt += 1
            log.info(
                "another process changed the town meanwhile; running the input again "
                "(attempt %d of %d)",
                attempt,
                attempts,
            )


@dataclass
class TickReport:
    clock: datetime
    events: list[TownEvent] = field(default_factory=list)
    skipped: bool = False  # paused
    chain: int = 0  # longest chain of dependent LLM calls (see town/llm/depth.py)
    write_ms: float = 0.0  # how long its one write transaction took (wall time, for the bench)


@dataclass
class Engine:
    store: Store
    spec: TownSpec
    brain: Brain
    streams: Callable[[int], MemoryStream]
    town_id: int
    reflect_threshold: int = REFLECT_THRESHOLD
    after_commit: Callable[[], None] | None = None  # e.g. flush the LLM usage tally
    llm: Handles = field(default_factory=Handles)  # the brain's handles (llm.chain.compose)
    # Called inside a tick's transaction just before it commits; raising rolls the tick back
    # (a worker checks there that it still holds the town's lease).
    guard: Callable[[Session], None] | None = None
    # Writers of this process, one at a time (held for a write, never while thinking); a
    # worker on SQLite shares one among its towns
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ticking: asyncio.Lock = field(default_factory=asyncio.Lock)  # one tick at a time
    # Where the tick in flight is: READING its snapshot, THINKING (nothing held), WRITING (its
    # thinking done: it waits for the lock, then writes); "" between ticks. Each step is logged
    # and told to ``watchers`` (the phase, the clock the tick moves to) as it happens.
    phase: str = ""
    watchers: list[Callable[[str, datetime], None]] = field(default_factory=list)

    @contextmanager
    def unit(self, *, changes_town: bool = True) -> Iterator[Session]:
        """A unit of work on this town from outside a tick (an input), checked by ``guard``
        before it commits like a tick is, so a worker that lost the town commits nothing.

        One that ``changes_town`` (writes what a tick writes too: a resident's row) raises the
        town's revision, so that a tick that read the row before rolls back rather than write
        over it; and raises :class:`TownChanged` instead of committing if another process
        raised it first (a tick committed since this unit began, say). Every other input (a
        whisper, ``set``, ``pause``, ``speed``, a visitor's words) leaves the revision alone:
        what it writes is never what a tick writes, so no tick thinks again because of it."""
        with self.store.session() as session:
            self.as_input(session, changes_town=changes_town)
            yield session

    def as_input(self, session: Session, *, changes_town: bool = True) -> None:
        """From here on ``session`` commits as an input's unit of work (see ``unit``): checked by
        ``guard``, and, if it ``changes_town``, raising the revision committed now (an input
        that thought from a snapshot writes on top of a tick that committed meanwhile)."""
        if changes_town:
            now = select(Town.revision).where(col(Town.id) == self.town_id)
            seen = session.exec(now).first()
            if seen is None:
                raise TownNotFound(f"town #{self.town_id} is not in the store")
            Store.before_commit(session, partial(self._raise_revision, seen=seen))
        if self.guard is not None:
            Store.before_commit(session, self.guard)

    def _raise_revision(self, session: Session, *, seen: int, **values: Any) -> None:
        """Raise the town's revision from the one read (``seen``), writing ``values`` on the
        town's row with it; :class:`TownChanged` if another writer raised it since."""
        raised = update(Town).where(col(Town.id) == self.town_id, col(Town.revision) == seen)
        values["revision"] = col(Town.revision) + 1
        if session.connection().execute(raised.values(**values)).rowcount != 1:
            raise TownChanged(self.town_id)

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
        return {r.name: r for r in rows if r.location != MOVED_AWAY}  # (moved away: kept apart)

    async def tick(self, *, force: bool = False) -> TickReport:
        """Advance the town by one tick (a paused town does not move unless ``force``): read a
        snapshot, think with nothing held, write the results in one short transaction."""
        async with self._one_tick():
            async with self.lock:  # ids for what it adds (a short write of its own)
                blocks(self.store.engine).top_up()
            with self.store.session(autoflush=False) as session:
                town = self.town(session)
                seen = town.revision
                if town.paused and not force:
                    return TickReport(town.clock, skipped=True)
                now = town.clock + timedelta(minutes=town.minutes_per_tick)
                tick = self.new_tick(session, now)
                # (words said while the last tick ran carry the clock it started from)
                since = town.clock - timedelta(minutes=town.minutes_per_tick)
                answered = heard.take_in(tick, self.town_id, since)
                take_pending(tick, self.town_id)
                Store.end_read(session)
                self._enter(THINKING, now)
                with Store.thinking(session):
                    chain = await self._run(tick)
                    for name, said in answered.items():
                        await tick.stream(tick.residents[name]).record(session, said, now)
                self._enter(WRITING, now)
                async with self.lock:
                    began = time.perf_counter()
                    self._raise_revision(session, seen=seen, clock=now, last_tick_at=_wall())
                    for write in tick.writes:
                        write(session)
                    write_outbox(session, self.town_id, now.isoformat(), tick.events)
                    session.flush()  # (what the guard reads is what commits)
                    if self.guard is not None:
                        self.guard(session)
                    committed = Store.commit(session)
                    write_ms = (time.perf_counter() - began) * 1000
                self._enter(COMMITTED, now)
                committed()  # (the index writes and caches: the lock is free again)
            if self.after_commit:
                self.after_commit()
            self.llm.report.ticked()  # the calls a tick wants, for the pace the server keeps
            return TickReport(now, tick.events, chain=chain, write_ms=write_ms)

    @asynccontextmanager
    async def _one_tick(self) -> AsyncIterator[None]:
        """The tick in flight (``ticking`` held), its ``phase`` cleared when it ends."""
        async with self.ticking:
            self.phase = READING
            try:
                yield
            finally:
                self.phase = ""

    def _enter(self, phase: str, now: datetime) -> None:
        self.phase = phase
        log.debug("tick to %s: %s", f"{now:%Y-%m-%d %H:%M}", phase)
        for watcher in list(self.watchers):
            try:
                watcher(phase, now)
            except Exception:  # (a watcher never fails the tick)
                log.exception("a watcher of the tick's phases failed")

    def new_tick(self, session: Session, now: datetime) -> Tick:
        """A tick's working set, read from the store: the residents' rows, the world, today's
        plan items, the conversations going on and each resident's memory arrays."""
        residents = self.residents(session)
        world = World.load(session, self.town_id, self.spec)
        specs = self.specs()
        tick = Tick(
            session=session,
            now=now,
            world=world,
            brain=PlainAnswers(self.brain),  # what a model writes is stored plain
            llm=self.llm,
            streams=self.streams,
            residents={n: r for n, r in residents.items() if n in specs},
            specs=specs,
        )
        for name, row in tick.residents.items():
            awake = bool((row.state or {}).get("awake", False))  # (ResidentState.awake)
            tick.start[name] = (row.location, row.action, awake)
            tick.stream(row).arrays.load(session)
        ids = [r.id for r in tick.residents.values()]
        today = select(PlanItem).where(
            col(PlanItem.resident_id).in_(ids), PlanItem.day == now.date()
        )
        for item in session.exec(today.order_by(col(PlanItem.id))).all():
            tick.plans.setdefault(item.resident_id, []).append(item)
        talks = {s.talk for s in (tick.state(r) for r in tick.residents.values()) if s.talk}
        if talks:
            going = select(Conversation).where(col(Conversation.id).in_(talks))
            tick.conversations = {c.id: c for c in session.exec(going).all() if c.id}
        return tick

    async def _run(self, tick: Tick) -> int:
        """The tick's work, every unit concurrent: each resident's one step (beside rating what
        it perceived), one turn of each conversation, one step of each reflection. Returns the
        longest chain of dependent LLM calls, which is one unless an input made more."""
        observed: dict[str, list[Observation]] = {}
        for name, row in tick.residents.items():
            state = tick.state(row)
            observed[name] = perceive(tick, row, state) if state.awake else []
        units: list[Coroutine[Any, Any, object]] = [
            think(tick, r, observed[n]) for n, r in tick.residents.items()
        ]
        units += [dialogue.step(tick, talk) for talk in self._talks(tick)]
        units += [self._reflect_step(tick, r) for r in tick.residents.values()]
        chain = await _longest(units)
        pairs = talks_to_begin(tick)
        await asyncio.gather(
            *(dialogue.begin(tick, tick.residents[a], tick.residents[b]) for a, b in pairs)
        )
        tick.save_states()
        return chain

    def _talks(self, tick: Tick) -> list[Conversation]:
        """The talks going on."""
        ids = {s.talk for s in (tick.state(r) for r in tick.residents.values()) if s.talk}
        found = {i: row for i in ids if (row := tick.conversations.get(i)) is not None}
        for resident in tick.residents.values():
            state = tick.state(resident)
            if state.talk is not None and state.talk not in found:
                state.talk = None  # a conversation that is gone: back to the plan
        return list(found.values())

    async def _reflect_step(self, tick: Tick, resident: Resident) -> None:
        """A reflection in three steps, a tick apart: questions, insights, storing them."""
        state = tick.state(resident)
        stream, name = tick.stream(resident), resident.name
        if state.reflect_insights:
            found = [Insight.model_validate(i) for i in state.reflect_insights]
            state.reflect_insights = []
            stored = await reflection.store(stream, tick.session, found, tick.now)
            if stored:
                tick.emit(
                    "reflected", resident, f"{name} reflected", insights=[m.text for m in stored]
                )
        elif state.reflect_questions:
            questions, state.reflect_questions = state.reflect_questions, []
            found = await reflection.insights(
                tick.brain, stream, tick.session, name, questions, tick.now
            )
            state.reflect_insights = [i.model_dump() for i in found]
            stream.warm_memories(reflection.as_memories(found))  # stored next tick
        elif state.awake and state.since_reflection >= self.reflect_threshold and may_begin(tick):
            state.since_reflection = 0
            state.reflect_questions = await reflection.ask(tick.brain, stream, tick.session, name)
            stream.warm(state.reflect_questions)  # asked next tick: embedded meanwhile


def _wall() -> datetime:
    return datetime.now(UTC)


def talks_to_begin(tick: Tick) -> list[tuple[str, str]]:
    """The talks asked for this tick that begin: each resident in one talk at most, urged ones
    first (they have something to say), then in the residents' order, so that which talks
    begin never depends on which LLM reply came back first."""
    busy = {n for n, r in tick.residents.items() if tick.state(r).talk is not None}
    order = {name: i for i, name in enumerate(tick.residents)}
    pairs = []
    for _, a, b in sorted(tick.talks, key=lambda t: (not t[0], order[t[1]], order[t[2]])):
        if not busy & {a, b}:
            busy |= {a, b}
            pairs.append((a, b))
    return pairs


async def _longest(units: Iterable[Coroutine[Any, Any, object]]) -> int:
    """Run units of work concurrently; the longest chain of LLM calls among them."""
    work = list(units)
    try:
        done = await asyncio.gather(*(chained(unit) for unit in work))
    except asyncio.CancelledError:  # the town was stopped mid-tick: close what never started
        for unit in work:
            if inspect.getcoroutinestate(unit) == inspect.CORO_CREATED:
                unit.close()
        raise
    return max((length for _, length in done), default=0)

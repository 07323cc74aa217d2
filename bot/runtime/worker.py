"""``bottown worker``: one of several processes that share the towns of one database.

Each town is run by exactly one worker at a time, through its lease (``town/store/lease.py``).
A worker's loop, every ``lease_seconds / 3``:

1. heartbeat (its registration under its name), and renew every lease it holds;
2. stop the towns whose lease was lost (renewal refused, or a tick's guard refused its commit)
   or may have expired while the database was out of reach;
3. give one town back when it holds more than its fair share and another worker has room;
4. take free towns (all towns in the database, or ``--towns``) and run each with ``run_town``,
   its engine's guard set to the lease check, so a tick whose lease is gone rolls back; the
   worker's ``Timekeeper`` gives each town it runs a tick job, and takes it away as it stops,
   and its ``Doorbell`` wakes each to take in what gateway processes (``bottown gateway``)
   stored for it.

A database that goes away is retried with backoff, and the towns stop once their leases may have
run out; SIGTERM (or Ctrl-C) stops the towns, gives their leases back and exits.

Platforms: the web adapter binds one port per process, and a Slack app's Socket Mode spreads its
events over every open connection, so a worker with ``--platform`` serves exactly one town
(``--towns NAME``); several such workers for one town make hot standbys. A headless worker (no
platform) runs any number of towns; their outbox waits for a worker with platforms.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from uuid import uuid4

from sqlmodel import col, select

from bot.runtime.held_town import HeldTown, found_named_town, how_it_ended, open_held_town
from bot.runtime.live import run_town, watch_served
from bot.runtime.run import PLATFORMS, TownRuntime
from bot.runtime.scheduler import Timekeeper
from bot.runtime.settings import Settings
from bot.runtime.taking_in import Doorbell
from bot.runtime.watch import Watch
from bot.runtime.wiring import Services
from bot.runtime.worker_connection import OUTAGE_ERRORS, outage_reason, worker_url
from town.memory.vectors import VectorIndexError
from town.store.db import StoreError
from town.store.lease import Lease, LeaseLost, Leases
from town.store.models import Town
from town.world.persona import PersonaError

log = logging.getLogger(__name__)


def check_platforms(platforms: list[str], towns: list[str] | None) -> None:
    for name in platforms:
        if name not in PLATFORMS:
            raise ValueError(f"unknown platform {name!r}; choose from {', '.join(PLATFORMS)}")
    if platforms and (towns is None or len(towns) != 1):
        raise ValueError(
            "a worker with --platform serves exactly one town: name it with --towns NAME "
            "(the web adapter binds one port, and a Slack app's Socket Mode spreads events over "
            "all its connections); run headless workers (no --platform) for many towns"
        )


@dataclass
class Worker:
    settings: Settings
    name: str
    platforms: list[str] = field(default_factory=list)
    towns: list[str] | None = None  # None: every town in the database
    poll_s: float = 0.0  # 0: a third of the lease time
    host: str = field(default_factory=socket.gethostname)
    instance: str = field(default_factory=lambda: uuid4().hex)  # this process, among its name's
    held: dict[int, HeldTown] = field(default_factory=dict)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    services: Services | None = None
    leases: Leases | None = None
    keeper: Timekeeper | None = None  # the ticks of the towns this worker runs
    doorbell: Doorbell | None = None  # wakes its towns for what gateway processes stored
    watch: Watch = field(default_factory=Watch)  # /healthz and /metrics of its towns
    _free_since: dict[int, float] = field(default_factory=dict)
    _cooldown: dict[int, float] = field(default_factory=dict)
    _unfoundable: set[str] = field(default_factory=set)
    _next_expiry: float | None = None  # seconds until another's lease on a town here may end
    _tick_lock: asyncio.Lock | None = None  # one writer at a time on SQLite
    _repairs: set[asyncio.Future[int]] = field(default_factory=set)  # (kept till they end)

    def __post_init__(self) -> None:
        check_platforms(self.platforms, self.towns)
        self.lease_s = self.settings.lease_seconds
        self.poll_s = self.poll_s or self.lease_s / 3

    @property
    def max_towns(self) -> int:
        return 1 if self.platforms else 1_000_000

    # -- the loop -----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set; then stop every town and give its lease back. With
        ``metrics_port`` set, ``/healthz`` and ``/metrics`` are served there from the start
        (503 until the database answers)."""
        async with watch_served(self.watch, self.settings):
            await self._run(stop)

    async def _run(self, stop: asyncio.Event) -> None:
        if not await self._connect(stop):
            return
        assert self.leases is not None and self.doorbell is not None
        ringing = asyncio.create_task(self.doorbell.run(), name="doorbell")
        try:
            await self._register(stop)
            log.info(
                "worker %r (instance %s) started: lease %g s, %s, %s",
                self.name,
                self.leases.instance[:8],
                self.lease_s,
                f"towns {', '.join(self.towns)}" if self.towns else "every town",
                f"platforms {', '.join(self.platforms)}" if self.platforms else "headless",
            )
            await self._loop(stop)
        finally:
            ringing.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await ringing
            await self._shutdown()

    async def _register(self, stop: asyncio.Event) -> None:
        assert self.leases is not None
        delay = 0.5
        while not stop.is_set():
            try:
                await asyncio.to_thread(self.leases.register, self.host, os.getpid())
                return
            except OUTAGE_ERRORS as exc:
                log.warning(
                    "cannot register yet (%s); trying again in %.1f s", outage_reason(exc), delay
                )
            await _sleep_unless(stop, delay)
            delay = min(delay * 2, self.poll_s)

    async def _loop(self, stop: asyncio.Event) -> None:
        backoff = 0.0
        while not stop.is_set():
            try:
                await self._round()
                if backoff:
                    log.info("the database is back")
                backoff = 0.0
            except OUTAGE_ERRORS as exc:
                backoff = min(self.poll_s, max(0.5, backoff * 2))
                log.warning(
                    "the database is out of reach (%s); trying again in %.1f s",
                    outage_reason(exc),
                    backoff,
                )
            await self._stop_overdue()
            self.wake.clear()
            if any(h.lost.is_set() for h in self.held.values()):
                continue
            pause = backoff or self.poll_s
            if not backoff and self._next_expiry is not None:  # a lease that may not be renewed
                pause = min(pause, self._next_expiry + 0.05)
            self._next_expiry = None
            waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self.wake.wait())]
            await asyncio.wait(waits, timeout=pause, return_when="FIRST_COMPLETED")
            for waiting in waits:
                waiting.cancel()

    async def _connect(self, stop: asyncio.Event) -> bool:
        """Open the store and the vector index, retrying with backoff while either is down."""
        delay = 1.0
        while not stop.is_set():
            try:
                self.services = await asyncio.to_thread(self._open_services)
                self.leases = Leases(self.services.store, self.name, self.lease_s, self.instance)
                self.keeper = Timekeeper(self.services.store, self.settings)
                self.doorbell = Doorbell(self.services.store)
                self.watch.store = self.services.store
                if self.services.store.is_sqlite:
                    self._tick_lock = asyncio.Lock()
                return True
            except (StoreError, VectorIndexError) as exc:
                log.warning("cannot start yet: %s; trying again in %.0f s", exc, delay)
            await _sleep_unless(stop, delay)
            delay = min(delay * 2, 30.0)
        return False

    def _open_services(self) -> Services:
        url = worker_url(self.settings.resolved_database_url, self.name, self.instance)
        return Services.open(self.settings.model_copy(update={"database_url": url}))

    async def _round(self) -> None:
        leases = self.leases
        assert leases is not None
        await asyncio.to_thread(leases.heartbeat)
        for held in list(self.held.values()):
            if held.lost.is_set():
                why = held.why_lost[-1] if held.why_lost else f"epoch {held.lease.epoch}"
                await self._stop(held, f"a tick found its lease gone: {why}")
                continue
            if held.task.done():
                await self._stop(held, how_it_ended(held.task), cool=True)
                continue
            sent = time.monotonic()
            try:
                await asyncio.to_thread(leases.renew, held.lease)
                held.renewed = sent
            except LeaseLost as exc:
                await self._stop(held, str(exc))
        towns = await asyncio.to_thread(self._candidates)
        for name in sorted(set(self.towns or ()) - set(towns.values())):
            founded = await self._found(name)
            if founded is not None and founded.id is not None:
                towns[founded.id] = name
        vacant, counts, self._next_expiry = await asyncio.to_thread(
            lambda: (
                leases.vacant(list(towns)),
                leases.held_by_live_workers(),
                leases.next_expiry([t for t in towns if t not in self.held]),
            )
        )
        share = max(1, math.ceil(len(towns) / max(1, len(counts))))
        await self._give_back(share, counts)
        now = time.monotonic()
        self._free_since = {t: self._free_since.get(t, now) for t in vacant}
        for town_id in vacant:
            if len(self.held) >= self.max_towns:
                break
            if town_id in self.held or self._cooldown.get(town_id, 0.0) > now:
                continue
            if len(self.held) >= share and now - self._free_since[town_id] < 2 * self.poll_s:
                continue  # another worker has room for it; take it only if nobody does
            sent = time.monotonic()
            lease = await asyncio.to_thread(leases.acquire, town_id)
            if lease is not None:
                await self._start(town_id, towns[town_id], lease, sent)

    def _candidates(self) -> dict[int, str]:
        """The towns this worker may run, by id."""
        assert self.services is not None
        with self.services.store.session() as s:
            query = select(Town.id, Town.name).order_by(col(Town.id))
            if self.towns is not None:
                query = query.where(col(Town.name).in_(self.towns))
            return {int(i): str(n) for i, n in s.exec(query).all() if i is not None}

    async def _found(self, name: str) -> Town | None:
        """Found a town named in --towns; a persona folder that cannot be loaded is logged once
        and tried again each round (it may be fixed)."""
        assert self.services is not None
        try:
            return await found_named_town(self.services, self.settings, name)
        except PersonaError as exc:
            if name not in self._unfoundable:
                log.error("cannot found town %r: %s", name, exc)
            self._unfoundable.add(name)
            return None

    async def _give_back(self, share: int, counts: dict[str, int]) -> None:
        """One town back per round while this worker holds more than its fair share and another
        live worker holds less."""
        if len(self.held) <= share:
            return
        if not any(n < share for w, n in counts.items() if w != self.name):
            return
        held = max(self.held.values(), key=lambda h: h.town_id)
        why = f"handed over ({len(self.held)} towns here, fair share {share})"
        await self._stop(held, why, level=logging.INFO)
        self._cooldown[held.town_id] = time.monotonic() + 3 * self.poll_s

    async def _stop_overdue(self) -> None:
        """Stop the towns whose lease may have expired since the last renewal that got through."""
        margin = min(self.poll_s, self.lease_s / 4)
        now = time.monotonic()
        for held in list(self.held.values()):
            if now - held.renewed >= self.lease_s - margin:
                await self._stop(held, "its lease could not be renewed in time")

    # -- towns --------------------------------------------------------------------------------

    async def _start(self, town_id: int, name: str, lease: Lease, sent: float) -> None:
        assert self.leases is not None and self.services is not None
        try:
            opened = open_held_town(self.services, self.settings, town_id, self._tick_lock)
        except Exception as exc:  # a town that cannot open (its persona folder is gone, say)
            log.error("cannot run town %r: %s; trying again later", name, exc)
            with contextlib.suppress(*OUTAGE_ERRORS):
                await asyncio.to_thread(self.leases.release, lease)
            self._cooldown[town_id] = time.monotonic() + 10 * self.poll_s
            return
        lost, why_lost = asyncio.Event(), []

        def on_lost(exc: LeaseLost) -> None:
            why_lost.append(str(exc))
            lost.set()
            self.wake.set()

        opened.engine.guard = self.leases.guard(lease, on_lost)
        runtime = TownRuntime(opened, self.settings, watch=self.watch)
        runtime.stop_on = (LeaseLost,)  # a tick that finds the lease gone ends the town's run
        run = run_town(runtime, self.platforms, keeper=self.keeper, doorbell=self.doorbell)
        task = asyncio.create_task(run, name=f"town-{name}")
        self.held[town_id] = HeldTown(town_id, name, lease, task, sent, lost, why_lost)
        log.info("running town %r (#%d) under lease epoch %d", name, town_id, lease.epoch)
        repair = asyncio.get_running_loop().run_in_executor(
            opened.services.executor, opened.services.repair_index, town_id
        )
        self._repairs.add(repair)
        repair.add_done_callback(lambda done: self._repaired(done, name))

    def _repaired(self, done: asyncio.Future[int], name: str) -> None:
        """The end of a town's index repair (``Services.repair_index``), run as it starts here."""
        self._repairs.discard(done)
        if done.cancelled():
            return
        if (error := done.exception()) is not None:
            log.warning("could not check town %r's vector index: %s", name, outage_reason(error))
        elif count := done.result():
            log.info(
                "town %r: %d memories the vector index lacked were embedded again", name, count
            )

    async def _stop(
        self, held: HeldTown, why: str, *, cool: bool = False, level: int = logging.WARNING
    ) -> None:
        """Stop running a town, then give its lease back if it is still ours."""
        self.held.pop(held.town_id, None)
        log.log(level, "stopped town %r (#%d): %s", held.name, held.town_id, why)
        held.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(held.task, 30)
        if cool:
            self._cooldown[held.town_id] = time.monotonic() + 10 * self.poll_s
        if self.leases is not None:
            with contextlib.suppress(*OUTAGE_ERRORS):
                await asyncio.to_thread(self.leases.release, held.lease)

    async def _shutdown(self) -> None:
        for held in list(self.held.values()):
            await self._stop(held, "the worker is stopping", level=logging.INFO)
        if self.keeper is not None:
            await self.keeper.close()
        if self.leases is not None:
            try:
                await asyncio.to_thread(self.leases.unregister)
            except OUTAGE_ERRORS as exc:
                log.warning("could not unregister worker %r: %s", self.name, outage_reason(exc))
        if self.services is not None:
            self.services.close()
        log.info("worker %r stopped", self.name)


async def _sleep_unless(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def run_worker(
    settings: Settings, worker: Worker, ready: Callable[[], None] | None = None
) -> None:
    """Run ``worker`` until SIGTERM or SIGINT."""
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if ready:
        ready()
    await worker.run(stop)

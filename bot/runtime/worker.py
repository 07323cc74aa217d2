"""``bottown worker``: one of several processes that share the towns of one database.

Each town is run by exactly one worker at a time, through its lease (``town/store/lease.py``).
A worker's loop, every ``lease_seconds / 3``:

1. heartbeat (its registration under its name), and renew every lease it holds;
2. stop the towns whose lease was lost (renewal refused, or a tick's guard refused its commit)
   or may have expired while the database was out of reach;
3. give one town back when it holds more than its fair share and another worker has room;
4. take free towns (all towns in the database, or ``--towns``) and run each with ``run_town``,
   its engine's guard set to the lease check, so a tick whose lease is gone rolls back; the
   worker's ``Timekeeper`` gives each town it runs a tick job, and takes it away as it stops.

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
from typing import Annotated
from uuid import uuid4

import typer
from rich.table import Table
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlmodel import col, select

from bot.cli.common import err, guarded, out, settings_and_logging
from bot.runtime.run import PLATFORMS, TownRuntime, run_town
from bot.runtime.scheduler import Timekeeper
from bot.runtime.settings import Settings
from bot.runtime.towns import OpenTown
from bot.runtime.wiring import Services, build_brain
from town.memory.vectors import VectorIndexError
from town.store.db import StoreError
from town.store.lease import Lease, LeaseLost, Leases, WorkerNameTaken, aware
from town.store.models import Town
from town.tick.engine import Engine
from town.tick.seed import TownExists, found_town
from town.world.load import load_town
from town.world.persona import PersonaError

log = logging.getLogger(__name__)

OUTAGE_ERRORS = (SQLAlchemyError, StoreError, VectorIndexError, OSError)
LOCK_TIMEOUT_MS = 2000  # a tick never waits longer than this for a row a stalled process holds
CONNECT_TIMEOUT_S = 10


def default_worker_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"[:100]


def application_name(name: str, instance: str) -> str:
    """How a worker's connections introduce themselves to PostgreSQL (``pg_stat_activity``)."""
    return f"bottown-worker {instance[:12]} {name}"[:63]


def worker_url(url: str, name: str, instance: str) -> str:
    """The database URL as this worker uses it: on PostgreSQL, its connections carry the worker's
    name and instance, give up connecting after a while, and wait at most ``LOCK_TIMEOUT_MS``
    for a row lock; settings the URL has already are kept."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return url
    query = dict(parsed.query)
    query.setdefault("application_name", application_name(name, instance))
    query.setdefault("connect_timeout", str(CONNECT_TIMEOUT_S))
    if "lock_timeout" not in str(query.get("options", "")):
        query["options"] = f"{query.get('options', '')} -c lock_timeout={LOCK_TIMEOUT_MS}".strip()
    return parsed.update_query_dict(query).render_as_string(hide_password=False)


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


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    lines = str(orig).strip().splitlines()
    return lines[0] if lines else type(orig).__name__


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
        """Run until ``stop`` is set; then stop every town and give its lease back."""
        if not await self._connect(stop):
            return
        assert self.leases is not None
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
            await self._shutdown()

    async def _register(self, stop: asyncio.Event) -> None:
        assert self.leases is not None
        delay = 0.5
        while not stop.is_set():
            try:
                await asyncio.to_thread(self.leases.register, self.host, os.getpid())
                return
            except OUTAGE_ERRORS as exc:
                log.warning("cannot register yet (%s); trying again in %.1f s", _reason(exc), delay)
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
                    _reason(exc),
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
                await self._stop(held, self._ended(held.task), cool=True)
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
        """Found a town named in --towns from the persona folder of the same name (once: the
        unique town name settles a race between workers)."""
        assert self.services is not None
        shared = self.services
        services = Services(
            shared.settings, shared.store, shared.embedder, shared.index, executor=shared.executor
        )
        try:
            spec = load_town(name)
            brain, _usage = build_brain(self.settings, shared.store, 0)
            with shared.store.session() as s:
                town = await found_town(s, spec, name, brain, services.stream, persona=name)
        except (TownExists, IntegrityError):  # another worker founded it first
            return None
        except PersonaError as exc:
            if name not in self._unfoundable:  # said once; tried again each round (a fix)
                log.error("cannot found town %r: %s", name, exc)
            self._unfoundable.add(name)
            return None
        log.info("founded town %r from the persona folder %r", name, name)
        return town

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
        assert self.leases is not None
        try:
            opened = self._open(town_id)
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
        runtime = TownRuntime(opened, self.settings)
        runtime.stop_on = (LeaseLost,)  # a tick that finds the lease gone ends the town's run
        run = run_town(runtime, self.platforms, keeper=self.keeper)
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
            log.warning("could not check town %r's vector index: %s", name, _reason(error))
        elif count := done.result():
            log.info(
                "town %r: %d memories the vector index lacked were embedded again", name, count
            )

    def _open(self, town_id: int) -> OpenTown:
        """The town with memory streams of its own over this worker's store and index (a
        town that comes back after another worker ran it starts from what is stored)."""
        shared = self.services
        assert shared is not None
        with shared.store.session() as s:
            town = s.get(Town, town_id)
        if town is None:
            raise LookupError(f"town #{town_id} is gone")
        spec = load_town(town.scenario or town.name)
        services = Services(
            shared.settings, shared.store, shared.embedder, shared.index, executor=shared.executor
        )
        brain, usage = build_brain(self.settings, shared.store, town_id)
        engine = Engine(
            shared.store, spec, brain, services.stream, town_id, after_commit=usage.flush
        )
        if self._tick_lock is not None:
            engine.lock = self._tick_lock
        return OpenTown(services, engine, usage, town)

    @staticmethod
    def _ended(task: asyncio.Task[None]) -> str:
        if task.cancelled():
            return "it was cancelled"
        error = task.exception()
        return f"it stopped: {error!r}" if error else "it stopped"

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
                log.warning("could not unregister worker %r: %s", self.name, _reason(exc))
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


def show_status(settings: Settings) -> None:
    """The live workers and the towns' leases, as tables."""
    services_url = settings.resolved_database_url
    from town.store.db import Store

    store = Store.open(services_url)
    try:
        leases = Leases(store, "status", settings.lease_seconds)
        with store.session() as s:
            now = leases.now(s)
            names = {t.id: t.name for t in s.exec(select(Town)).all()}
        workers = Table("worker", "host", "pid", "heartbeat", title="live workers")
        for w in leases.live_workers():
            age = (now - aware(w.heartbeat_at)).total_seconds()
            workers.add_row(w.name, w.host, str(w.pid), f"{age:.0f} s ago")
        out.print(workers)
        table = Table("town", "worker", "epoch", "lease", title="leases")
        for row in leases.holders():
            left = (aware(row.expires_at) - now).total_seconds()
            state = f"{left:.0f} s left" if left > 0 else f"expired {-left:.0f} s ago"
            table.add_row(
                names.get(row.town_id, f"#{row.town_id}"), row.worker, str(row.epoch), state
            )
        out.print(table)
    finally:
        store.dispose()


def worker(
    name: Annotated[
        str | None,
        typer.Option(help="This worker's name (default: settings.worker_name, else host-pid)."),
    ] = None,
    platform: Annotated[
        list[str] | None,
        typer.Option(
            "--platform",
            "-p",
            help="web, discord or slack (repeat for several); needs --towns with one town. "
            "Default: headless.",
        ),
    ] = None,
    towns: Annotated[
        str | None,
        typer.Option(help="Comma-separated town names (founded if missing); default: every town."),
    ] = None,
    status: Annotated[
        bool, typer.Option("--status", help="Show the live workers and the leases, then exit.")
    ] = False,
) -> None:
    """Run towns from a shared database with other workers: each town on one worker at a time."""

    def run() -> None:
        settings = settings_and_logging()
        if status:
            show_status(settings)
            return
        chosen = [t.strip() for t in towns.split(",") if t.strip()] if towns else None
        if towns is not None and not chosen:
            raise ValueError("--towns names no town")
        the_worker = Worker(
            settings,
            name or settings.worker_name or default_worker_name(),
            platforms=list(platform or []),
            towns=chosen,
        )
        try:
            asyncio.run(run_worker(settings, the_worker))
        except WorkerNameTaken as exc:
            err.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    guarded(run)


if __name__ == "__main__":  # pragma: no cover - `python -m bot.worker` runs the command alone
    typer.run(worker)

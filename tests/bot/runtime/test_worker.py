"""Scale-out: leases on SQLite and a real PostgreSQL server, and `bottown worker` processes that
share towns over PostgreSQL and a real Chroma server, never ticking one town twice."""

from __future__ import annotations

import itertools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from sqlalchemy import text, update
from sqlalchemy.engine import make_url
from sqlmodel import col, select

from bot.runtime.worker import check_platforms
from bot.runtime.worker_connection import worker_url
from tests.factories import MINITOWN, add_resident, add_town
from town.store.db import Store
from town.store.lease import Lease, LeaseLost, Leases, WorkerNameTaken, aware
from town.store.models import Delivery, OutboxEvent, Town, TownLease, WorkerRow

pytest_plugins = ["tests.servers"]

T0 = datetime(2023, 2, 13, 7, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A migrated store on SQLite, and on a fresh database of a real PostgreSQL server."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'town.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    store = Store.open(url)
    yield store
    store.dispose()


def add_towns(store: Store, n: int) -> list[int]:
    with store.session() as s:
        return [add_town(s, f"t{i}-{uuid4().hex[:6]}", T0).id or 0 for i in range(n)]


def registered(store: Store, name: str, lease_seconds: float = 30.0) -> Leases:
    leases = Leases(store, name, lease_seconds)
    leases.register("test-host", os.getpid())
    return leases


def edit_lease(store: Store, town_id: int, **values: Any) -> None:
    """What an operator might do by hand to a lease row."""
    with store.session() as s:
        s.execute(update(TownLease).where(col(TownLease.town_id) == town_id).values(**values))


def lease_row(store: Store, town_id: int) -> TownLease:
    with store.session() as s:
        row = s.get(TownLease, town_id)
        assert row is not None
        return row


def passes(store: Store, leases: Leases, lease: Lease) -> bool:
    """Would a tick of ``leases`` under ``lease`` commit now? (The check, rolled back.)"""
    try:
        with store.session() as s:
            leases.check(s, lease)
            raise _Rollback
    except _Rollback:
        return True
    except LeaseLost:
        return False


class _Rollback(Exception):
    pass


# -- leases, in process ------------------------------------------------------------------------


def test_acquire_renew_release_and_takeover_raise_the_epoch(db: Store) -> None:
    (town,) = add_towns(db, 1)
    one, two = registered(db, "one"), registered(db, "two")
    first = one.acquire(town)
    assert first is not None and first.epoch == 1
    assert two.acquire(town) is None  # held by a live worker
    left = two.next_expiry([town])  # when "two" may try again: the lease's time
    assert left is not None and 29 < left <= 30 and one.next_expiry([town]) is None
    before = first.expires_at
    one.renew(first)
    assert first.expires_at >= before and passes(db, one, first)

    edit_lease(db, town, expires_at=datetime.now(UTC) - timedelta(seconds=1))  # time passed
    assert not passes(db, one, first)  # an expired lease commits nothing
    second = two.acquire(town)
    assert second is not None and second.epoch == 2
    with pytest.raises(LeaseLost, match="now belongs to worker 'two' at epoch 2"):
        one.renew(first)
    assert not passes(db, one, first) and passes(db, two, second)

    assert two.release(second) and not passes(db, two, second)
    third = one.acquire(town)
    assert third is not None and third.epoch == 3  # epochs never go back
    assert not two.release(second)  # not its lease anymore: nothing changes
    assert lease_row(db, town).worker == "one"


def test_a_stale_owners_tick_rolls_back_whole(db: Store) -> None:
    import asyncio

    from tests.town.tick.test_engine import make_engine

    engine = asyncio.run(make_engine(db))
    one, two = registered(db, "one"), registered(db, "two")
    lease = one.acquire(engine.town_id)
    assert lease is not None
    engine.guard = one.guard(lease)
    report = asyncio.run(engine.tick())
    with db.session() as s:
        assert engine.town(s).clock == report.clock
        outbox = len(s.exec(select(OutboxEvent)).all())

    edit_lease(db, engine.town_id, expires_at=datetime.now(UTC) - timedelta(seconds=1))
    assert two.acquire(engine.town_id) is not None
    lost: list[str] = []
    engine.guard = one.guard(lease, lambda exc: lost.append(str(exc)))
    with pytest.raises(LeaseLost):
        asyncio.run(engine.tick())
    assert lost == [
        f"town #{engine.town_id}: lease (epoch 1) now belongs to worker 'two' at epoch 2"
    ]
    with db.session() as s:
        assert engine.town(s).clock == report.clock  # the clock did not move
        assert len(s.exec(select(OutboxEvent)).all()) == outbox  # and nothing was written


@pytest.mark.parametrize(
    "edit",
    ["unknown worker, far future", "epoch changed", "names the other worker"],
)
def test_a_lease_row_edited_by_hand_never_yields_two_owners(db: Store, edit: str) -> None:
    (town,) = add_towns(db, 1)
    one, two = registered(db, "one"), registered(db, "two")
    lease = one.acquire(town)
    assert lease is not None
    far = datetime.now(UTC) + timedelta(days=1)
    if edit == "unknown worker, far future":
        edit_lease(db, town, worker="ghost", instance="ghost", epoch=9, expires_at=far)
    elif edit == "epoch changed":
        edit_lease(db, town, epoch=9)
    else:
        edit_lease(db, town, worker="two", instance=two.instance)
    assert not passes(db, one, lease)  # the guard catches every edit
    forged = Lease(town, lease.epoch, lease.expires_at)  # what "two" would need to hold
    assert passes(db, two, forged) == (edit == "names the other worker")  # the row names one owner
    with pytest.raises(LeaseLost):
        one.renew(lease)
    taken = two.acquire(town)
    if edit == "epoch changed":  # its holder is alive and the expiry plausible: wait it out
        assert taken is None
        edit_lease(db, town, expires_at=datetime.now(UTC) - timedelta(seconds=1))
        taken = two.acquire(town)
    assert taken is not None and taken.epoch > lease.epoch
    assert taken.epoch == lease_row(db, town).epoch
    owners = [passes(db, one, lease), passes(db, two, taken)]
    assert owners == [False, True]


def test_a_second_live_process_with_the_same_name_is_refused(db: Store) -> None:
    (town,) = add_towns(db, 1)
    first = registered(db, "alpha")
    lease = first.acquire(town)
    assert lease is not None
    second = Leases(db, "alpha")
    with pytest.raises(WorkerNameTaken, match=r"in use by a live process .* another --name"):
        second.register("other-host", 4242)
    first.heartbeat()  # still its own

    with db.session() as s:  # the first process dies: its heartbeat goes stale
        s.execute(update(WorkerRow).values(heartbeat_at=datetime.now(UTC) - timedelta(seconds=31)))
    second.register("other-host", 4242)
    with pytest.raises(WorkerNameTaken, match="now belongs to another process"):
        first.heartbeat()
    # the dead process's lease is free at once: its instance is no live worker
    taken = second.acquire(town)
    assert taken is not None and taken.epoch == 2
    second.unregister()
    with db.session() as s:
        assert s.get(WorkerRow, "alpha") is None
    second.heartbeat()  # a row deleted under a live worker is written again
    assert [w.name for w in second.live_workers()] == ["alpha"]


def test_racing_workers_get_one_lease_each_town(postgres_url: str) -> None:
    """Eight processes' worth of lease keepers race for the same towns at the same instant,
    first for a town with no lease row (INSERT racing on the key), then for an expired one."""
    store = Store.open(postgres_url)
    towns = add_towns(store, 2)
    keepers = [registered(store, f"w{i}") for i in range(8)]

    def race(town_id: int) -> list[Lease]:
        gate = threading.Barrier(len(keepers))
        won: list[Lease] = []

        def attempt(leases: Leases) -> None:
            gate.wait()
            got = leases.acquire(town_id)
            if got is not None:
                won.append(got)

        threads = [threading.Thread(target=attempt, args=(k,)) for k in keepers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return won

    for town in towns:
        assert len(race(town)) == 1
        edit_lease(store, town, expires_at=datetime.now(UTC) - timedelta(seconds=1))
        (winner,) = race(town)
        assert winner.epoch == 2 and lease_row(store, town).epoch == 2

    # four processes start under one name at the same instant: one runs, three are refused
    same = [Leases(store, "same") for _ in range(4)]
    gate = threading.Barrier(len(same))
    refusals: list[str] = []

    def register(leases: Leases) -> None:
        gate.wait()
        try:
            leases.register("host", 1)
        except WorkerNameTaken as exc:
            refusals.append(str(exc))

    threads = [threading.Thread(target=register, args=(k,)) for k in same]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(refusals) == 3
    assert all("'same' is in use by a live process (pid 1 on host" in r for r in refusals)
    store.dispose()


def test_a_takeover_waits_for_the_passing_ticks_commit(postgres_url: str) -> None:
    """The guard locks the lease row until the tick commits: a takeover that comes meanwhile
    waits for the commit and then fences the old owner out."""
    store = Store.open(postgres_url)
    (town,) = add_towns(store, 1)
    one, two = registered(store, "one", 1.0), registered(store, "two", 1.0)
    lease = one.acquire(town)
    assert lease is not None
    taken: list[tuple[Lease | None, float]] = []
    with store.session() as s:
        one.check(s, lease)  # the tick's guard passed: the row is locked
        s.execute(update(Town).where(col(Town.id) == town).values(clock=T0 + timedelta(minutes=1)))
        time.sleep(1.2)  # the lease expires while the tick is still committing
        thread = threading.Thread(
            target=lambda: taken.append((two.acquire(town), time.monotonic()))
        )
        thread.start()
        time.sleep(0.5)
        assert taken == []  # the takeover waits on the row lock
        committed = time.monotonic()
    thread.join(10)
    ((got, at),) = taken
    assert got is not None and got.epoch == 2 and at >= committed
    assert not passes(store, one, lease)
    with store.session() as s:
        assert aware(s.get(Town, town).clock) == T0 + timedelta(minutes=1)  # type: ignore[union-attr]
    store.dispose()


def test_worker_options_are_checked() -> None:
    with pytest.raises(ValueError, match="exactly one town"):
        check_platforms(["web"], None)
    with pytest.raises(ValueError, match="exactly one town"):
        check_platforms(["slack"], ["a", "b"])
    with pytest.raises(ValueError, match="unknown platform 'irc'"):
        check_platforms(["irc"], ["a"])
    check_platforms([], None)
    check_platforms(["web"], ["a"])
    with pytest.raises(ValueError, match="1 to 100"):
        Leases(Store.__new__(Store), "")
    url = make_url(
        worker_url("postgresql+psycopg://u:pw@127.0.0.1:5/db?sslmode=disable", "w1", "abc")
    )
    assert url.query["application_name"] == "bottown-worker abc w1"
    assert url.query["options"] == "-c lock_timeout=2000" and url.query["sslmode"] == "disable"
    assert url.password == "pw"
    assert worker_url("sqlite:///x.db", "w1", "abc") == "sqlite:///x.db"


# -- `bottown worker` processes over PostgreSQL and a Chroma server ----------------------------

LEASE_S = 3.0
TICK_S = 0.25
TICK_LOG = """
CREATE TABLE tick_log (
    id serial PRIMARY KEY, town_id int, old_clock timestamptz, new_clock timestamptz,
    app text, lease_worker text, lease_instance text, lease_epoch int,
    at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION log_tick() RETURNS trigger AS $$
BEGIN
    IF NEW.clock IS DISTINCT FROM OLD.clock THEN
        INSERT INTO tick_log (town_id, old_clock, new_clock, app,
                              lease_worker, lease_instance, lease_epoch)
        SELECT NEW.id, OLD.clock, NEW.clock, current_setting('application_name'),
               l.worker, l.instance, l.epoch
        FROM (SELECT 1) AS one LEFT JOIN townlease l ON l.town_id = NEW.id;
    END IF;
    RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER town_tick AFTER UPDATE ON town FOR EACH ROW EXECUTE FUNCTION log_tick();
"""


def worker_command() -> list[str]:
    """`bottown worker`, as a process."""
    return [sys.executable, "-m", "bot.cli.main", "worker"]


@dataclass
class Deployment:
    """Towns in a PostgreSQL database with their vectors on a Chroma server, and the worker
    processes started on them. Every clock change is logged by a trigger with the committing
    connection's name and the lease row it saw, in the committing transaction."""

    url: str
    chroma: str
    folder: Path
    namespace: str = field(default_factory=lambda: f"w{uuid4().hex[:10]}")
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    env_extra: dict[str, str] = field(default_factory=dict)

    def settings(self) -> Any:
        from bot.runtime.settings import load_settings

        return load_settings(
            database_url=self.url,
            chroma_url=self.chroma,
            chroma_namespace=self.namespace,
            embedder="hash",
            brain="offline",
            data_dir=self.folder / "data",
        )

    def found(self, count: int) -> list[int]:
        import asyncio

        return asyncio.run(self.found_async(count))

    async def found_async(self, count: int) -> list[int]:
        """``count`` minitowns, and the trigger that logs every clock change."""
        from bot.runtime.towns import open_town

        ids = []
        for i in range(count):
            opened = await open_town(
                self.settings(), f"town{i}", persona=str(MINITOWN), create=True
            )
            opened.services.close()
            assert opened.town.id is not None
            ids.append(opened.town.id)
        self.execute(TICK_LOG)
        return ids

    def env(self, name: str) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith("BOTTOWN_")}
        return {
            **keep,
            "BOTTOWN_DATABASE_URL": self.url,
            "BOTTOWN_CHROMA_URL": self.chroma,
            "BOTTOWN_CHROMA_NAMESPACE": self.namespace,
            "BOTTOWN_EMBEDDER": "hash",
            "BOTTOWN_BRAIN": "offline",
            "BOTTOWN_TICK_SECONDS": str(TICK_S),
            "BOTTOWN_LEASE_SECONDS": str(LEASE_S),
            "BOTTOWN_MISSED_TIME": "catch-up",  # every missed tick is run: each commit is one
            "BOTTOWN_CATCH_UP_TICKS": "10000",
            "BOTTOWN_DATA_DIR": str(self.folder / f"data-{name}"),
            "COLUMNS": "240",
            **self.env_extra,
        }

    def start(self, name: str, *args: str, label: str | None = None) -> subprocess.Popen[bytes]:
        label = label or name
        proc = subprocess.Popen(
            [*worker_command(), "--name", name, *args],
            env=self.env(name),
            cwd=self.folder,
            stdout=(self.folder / f"{label}.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        self.procs[label] = proc
        return proc

    def log(self, label: str) -> str:
        return (self.folder / f"{label}.log").read_text(errors="replace")

    def tails(self, *labels: str, lines: int = 15) -> str:
        """The last lines of these workers' logs, to explain a wait that timed out."""
        return "\n".join(
            f"--- {label}.log\n" + "\n".join(self.log(label).splitlines()[-lines:])
            for label in labels
        )

    def query(self, sql: str, **params: Any) -> list[Any]:
        store = Store(self.url)
        try:
            with store.engine.connect() as conn:
                return list(conn.execute(text(sql), params).all())
        finally:
            store.dispose()

    def execute(self, sql: str, **params: Any) -> None:
        store = Store(self.url)
        try:
            with store.engine.begin() as conn:
                if params:
                    conn.execute(text(sql), params)
                else:
                    conn.exec_driver_sql(sql)
        finally:
            store.dispose()

    def holders(self) -> dict[int, tuple[str, int]]:
        """Unexpired leases: town -> (worker, epoch)."""
        rows = self.query(
            "select town_id, worker, epoch from townlease where expires_at > clock_timestamp()"
        )
        return {r[0]: (r[1], r[2]) for r in rows}

    def ticks_by(self) -> dict[str, int]:
        rows = self.query("select lease_worker, count(*) from tick_log group by lease_worker")
        return {r[0]: r[1] for r in rows}

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def wait_for(
    what: str, done: Callable[[], Any], timeout: float = 120.0, explain: Callable[[], str] = str
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = done()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}\n{explain()}")


def check_tick_log(deployment: Deployment, minutes_per_tick: int = 10) -> dict[int, int]:
    """Every committed clock change of every town: on from the clock the previous commit left
    (never two ticks from the same clock), by one tick (or by whole ticks when missed time was
    jumped over), committed by the process the lease row named at that moment, epochs never
    going back; every tick's outbox events belong to a logged commit. Returns ticks per town."""
    keys = deployment.query("select town_id, idempotency_key from outboxevent")  # read first:
    rows = deployment.query(  # every tick whose events were read is in the log read after
        "select town_id, old_clock, new_clock, app, lease_worker, lease_instance, lease_epoch "
        "from tick_log order by town_id, id"
    )
    by_town: dict[int, list[Any]] = {}
    for row in rows:
        by_town.setdefault(row[0], []).append(row)
    step = timedelta(minutes=minutes_per_tick)
    ticks: dict[int, int] = {}
    for town_id, commits in by_town.items():
        for before, after in itertools.pairwise(commits):
            assert after[1] == before[2], (
                f"town {town_id}: a tick from {after[1]} after {before[2]}"
            )
            assert after[6] >= before[6], f"town {town_id}: the epoch went back"
        for _, old, new, app, worker, instance, _epoch in commits:
            moved = new - old
            assert moved >= step and moved % step == timedelta(0), f"town {town_id}: {moved}"
            assert worker is not None, f"town {town_id}: a tick committed with no lease"
            assert app == f"bottown-worker {instance[:12]} {worker}"[:63], (
                f"town {town_id}: {app!r} committed while the lease named {worker} ({instance})"
            )
        ticks[town_id] = sum(1 for c in commits if c[2] - c[1] == step)
    committed = {(c[0], c[2]) for commits in by_town.values() for c in commits}
    for town_id, key in keys:
        if key.startswith(f"{town_id}:"):  # a tick's events: the tick was logged, once
            at = datetime.fromisoformat(key.split(":", 1)[1].rsplit(":", 1)[0])
            assert (town_id, at) in committed, f"outbox {key} has no committed tick"
    return ticks


@pytest.fixture
def deployment(postgres_url: str, chroma_url: str, tmp_path: Path) -> Iterator[Deployment]:
    found = Deployment(postgres_url, chroma_url, tmp_path)
    yield found
    found.stop_all()


def test_workers_share_towns_and_never_tick_one_twice(deployment: Deployment) -> None:
    """Three workers start (two under one name: the second is refused) and share four towns;
    then a lease row is edited by hand, a worker is frozen past its lease and thawed (SIGSTOP:
    a pause, a partition), and a worker is killed (SIGKILL). Through it all every tick commits
    once, from the clock the last one left, by the process the lease names."""
    towns = deployment.found(4)
    ones = deployment.start("one"), deployment.start("one", label="one-again")
    two = deployment.start("two")
    wait_for("one of the two 'one's to exit", lambda: any(p.poll() is not None for p in ones))
    refused, label = (ones[0], "one") if ones[0].poll() is not None else (ones[1], "one-again")
    one = ones[1] if refused is ones[0] else ones[0]
    assert refused.wait() == 2  # the second worker with a live worker's name
    assert "worker name 'one' is in use by a live process" in " ".join(
        deployment.log(label).split()
    )
    logs = {"one": "one-again" if label == "one" else "one", "two": "two"}

    def explain() -> str:
        return deployment.tails(logs["one"], "two")

    holders = wait_for(
        "two towns each",
        lambda: (
            (h := deployment.holders())
            and sorted(w for w, _ in h.values()) == ["one"] * 2 + ["two"] * 2
            and h
        ),
        explain=explain,
    )
    wait_for("both to tick", lambda: set(deployment.ticks_by()) == {"one", "two"}, explain=explain)

    # a lease row edited by hand: its holder's next tick rolls back; the town is taken again
    edited = min(holders)
    epoch = holders[edited][1]
    deployment.execute(
        "update townlease set worker = 'ghost', instance = 'ghost', epoch = epoch + 10,"
        " expires_at = clock_timestamp() + interval '1 day' where town_id = :t",
        t=edited,
    )
    wait_for(
        "the edited town to be taken over again",
        lambda: (h := deployment.holders().get(edited)) and h[1] > epoch + 10,
        explain=explain,
    )
    assert "edited by hand" in deployment.log(logs["one"]) + deployment.log("two")

    # "two" frozen past its lease: "one" takes its towns; thawed, "two" commits nothing stale
    frozen = {t for t, (w, _) in deployment.holders().items() if w == "two"}
    two.send_signal(signal.SIGSTOP)
    wait_for(
        "the frozen worker's towns to be taken over",
        lambda: all(deployment.holders().get(t, ("two", 0))[0] == "one" for t in frozen),
        explain=explain,
    )
    two.send_signal(signal.SIGCONT)
    wait_for(
        "the thawed worker to see its leases gone",
        lambda: (
            "now belongs to worker 'one'" in deployment.log("two")
            or "could not be renewed in time" in deployment.log("two")
        ),
        explain=explain,
    )
    wait_for(
        "the towns to be shared again",
        lambda: sorted(w for w, _ in deployment.holders().values()) == ["one"] * 2 + ["two"] * 2,
        explain=explain,
    )

    one.kill()  # SIGKILL: no goodbye, its leases just stop being renewed
    its_towns = {t for t, (w, _) in deployment.holders().items() if w == "one"}
    seen = deployment.query("select coalesce(max(id), 0) from tick_log")[0][0]

    def taken_over() -> bool:
        holders = deployment.holders()
        if sorted(holders) != sorted(towns) or any(w != "two" for w, _ in holders.values()):
            return False
        ticked = deployment.query(
            "select distinct town_id from tick_log where id > :seen and lease_worker = 'two'",
            seen=seen,
        )
        return its_towns <= {r[0] for r in ticked}

    wait_for(
        "worker two to take over and tick the killed worker's towns", taken_over, explain=explain
    )

    two.send_signal(signal.SIGTERM)
    assert two.wait(20) == 0
    assert "worker 'two' stopped" in deployment.log("two")
    assert deployment.holders() == {}  # it gave its leases back on the way out
    assert [r[0] for r in deployment.query("select name from worker")] == ["one"]  # the dead one
    commits = check_tick_log(deployment)
    assert sorted(commits) == sorted(towns) and min(commits.values()) >= 5
    jumps = deployment.query(
        "select count(*) from tick_log where new_clock - old_clock > interval '10 minutes'"
    )[0][0]
    assert jumps <= 2 * len(towns)  # only where a takeover's catch-up tick failed
    check_vectors(deployment)


def check_vectors(deployment: Deployment, residents: int | None = 12) -> None:
    """Every memory row has its vector on the Chroma server, under its id (those a killed
    worker never wrote were embedded again by the worker that took the town over), in its
    town's collection. With ``residents`` None, only the towns whose memories were used have a
    collection."""
    from urllib.parse import urlparse

    import chromadb
    from chromadb.config import Settings as ChromaSettings

    parts = urlparse(deployment.chroma)
    client = chromadb.HttpClient(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 8000,
        settings=ChromaSettings(anonymized_telemetry=False),
    )
    rows = deployment.query(
        "select m.resident_id, r.town_id, m.id from memory m"
        " join resident r on r.id = m.resident_id"
    )
    by_resident: dict[tuple[int, int], set[str]] = {}
    for resident, town, memory in rows:
        by_resident.setdefault((resident, town), set()).add(str(memory))
    assert residents is None or len(by_resident) == residents
    present = {c.name for c in client.list_collections()}
    checked = 0
    for (resident, town), ids in by_resident.items():
        name = f"{deployment.namespace}-t{town}"
        if residents is None and name not in present:
            continue
        checked += 1
        coll = client.get_collection(name)
        stored = set(coll.get(where={"resident": resident}, include=[])["ids"])
        assert ids <= stored, f"resident {resident}: {len(ids - stored)} vectors missing"
    assert checked


# -- a worker in this process, for outages -------------------------------------------------------


async def until(what: str, done: Callable[[], Any], within: float = 120.0) -> Any:
    import asyncio

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = done()
        if found:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out after {within:g} s waiting for {what}")


def fast(settings: Any, **changes: Any) -> Any:
    return settings.model_copy(
        update={
            "lease_seconds": 2.0,
            "tick_seconds": TICK_S,
            "missed_time": "catch-up",
            "catch_up_ticks": 10000,
            **changes,
        }
    )


async def test_a_database_that_goes_away_and_comes_back(
    chroma_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker keeps trying, stops its towns once their leases may have run out, and takes
    them up again when the database is back; no tick is lost or doubled on the way."""
    import asyncio

    from bot.runtime.worker import Worker
    from tests.servers import PgCluster, create_database

    caplog.set_level(logging.INFO)
    cluster = PgCluster()
    try:
        deployment = Deployment(create_database(cluster.url), chroma_url, tmp_path)
        towns = await deployment.found_async(2)
        worker = Worker(fast(deployment.settings()), "solo")
        stop = asyncio.Event()
        running = asyncio.create_task(worker.run(stop))
        await until("both towns to tick", lambda: len(check_tick_log(deployment)) == 2)

        await asyncio.to_thread(cluster.stop)
        await until("the towns to stop", lambda: not worker.held, 2.0 + 3)
        assert "the database is out of reach" in caplog.text
        assert "its lease could not be renewed in time" in caplog.text
        await asyncio.sleep(1.0)
        assert not running.done()  # it keeps trying

        await asyncio.to_thread(cluster.start)
        before = check_tick_log(deployment)
        await until("the towns to run again", lambda: sorted(worker.held) == sorted(towns), 15)
        await until(
            "ticks after the outage",
            lambda: all(n > before[t] for t, n in check_tick_log(deployment).items()),
        )
        assert "the database is back" in caplog.text
        stop.set()
        await asyncio.wait_for(running, 30)
        assert deployment.holders() == {}
        check_tick_log(deployment)
    finally:
        cluster.destroy()


async def test_a_chroma_server_that_is_down_is_waited_for(
    postgres_url: str, chroma_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Down when the worker starts: a clear message and retries; once it is up (empty: the
    vectors are embedded again from the stored memories), the towns run."""
    import asyncio

    from bot.runtime.worker import Worker
    from tests.servers import ChromaServer, free_port

    caplog.set_level(logging.INFO)
    deployment = Deployment(postgres_url, chroma_url, tmp_path)
    (town,) = await deployment.found_async(1)
    port = free_port()
    settings = fast(deployment.settings(), chroma_url=f"http://127.0.0.1:{port}")
    worker = Worker(settings, "patient")
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    await until("a clear message", lambda: "cannot start yet" in caplog.text)
    assert f"Chroma index at http://127.0.0.1:{port}" in caplog.text
    server = await asyncio.to_thread(ChromaServer, port)
    try:
        await until("the town to tick", lambda: check_tick_log(deployment).get(town, 0) >= 3, 30)
        stop.set()
        await asyncio.wait_for(running, 30)
        check_vectors(replace(deployment, chroma=server.url), residents=None)
    finally:
        server.stop()


async def test_a_worker_on_sqlite_runs_several_towns_and_shows_its_leases(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The embedded store works for a worker too: its towns take turns at the one writer. A
    town named in --towns that is missing is founded from its persona folder (or said to be
    impossible, once)."""
    import asyncio

    from bot.cli.worker import show_status
    from bot.runtime.scheduler import job_id
    from bot.runtime.settings import load_settings
    from bot.runtime.towns import open_town
    from bot.runtime.worker import Worker

    settings = load_settings(data_dir=tmp_path / "data", embedder="hash", brain="offline")
    clocks = {}
    for name in ("north", "south"):
        opened = await open_town(settings, name, persona=str(MINITOWN), create=True)
        clocks[opened.town.id] = opened.town.clock
        opened.services.close()
    worker = Worker(fast(settings), "local", towns=["north", "south", "smallville", "atlantis"])
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    store = Store(settings.resolved_database_url)

    def moved() -> bool:
        with store.session() as s:
            towns = {t.name: t for t in s.exec(select(Town)).all()}
        return set(towns) == {"north", "south", "smallville"} and all(
            aware(towns[n].clock) >= clocks[towns[n].id] + timedelta(minutes=30)
            for n in ("north", "south")
        )

    await until("smallville founded, north and south ticking", moved)
    await until("smallville to run", lambda: len(worker.held) == 3)
    keeper = worker.keeper
    assert keeper is not None
    await until(  # one keeper for the worker: each town it runs has its tick job
        "a tick job for each town",
        lambda: {j.id for j in keeper.scheduler.get_jobs()} == {job_id(t) for t in worker.held},
    )
    assert caplog.text.count("cannot found town 'atlantis'") == 1  # said once, not each round
    show_status(settings)
    shown = capsys.readouterr().out
    assert "local" in shown and "smallville" in shown and "s left" in shown
    stop.set()
    await asyncio.wait_for(running, 30)
    assert keeper.scheduler.get_jobs() == [] and not keeper.scheduler.running
    with store.session() as s:
        assert all(aware(r.expires_at) <= datetime.now(UTC) for r in s.exec(select(TownLease)))
        assert s.exec(select(WorkerRow)).all() == []
    store.dispose()


def test_two_pumps_on_postgresql_post_each_event_once(postgres_url: str) -> None:
    """A stale owner's pump still running beside the new owner's: the delivery row is the
    claim, so on PostgreSQL each outbox event reaches the platform once (the leases make this
    the rare case; the rows make it safe)."""
    import asyncio

    from adapters.core.delivery import OutboxPump
    from adapters.core.ports import Outgoing

    store = Store.open(postgres_url)
    (town,) = add_towns(store, 1)
    with store.session() as s:
        for n in range(60):
            s.add(
                OutboxEvent(
                    town_id=town,
                    channel=f"area {n % 6}",
                    kind="said",
                    payload={"resident": "Isabella Rodriguez", "text": f"line {n}"},
                    game_time=T0,
                    idempotency_key=f"{town}:k{n}",
                )
            )
    posted: list[str] = []
    lock = threading.Lock()

    class Recorder:
        name, max_chars, min_interval_s = "web", 2000, 0.0

        async def send(self, message: Outgoing) -> str:
            await asyncio.sleep(0.002)
            with lock:
                posted.append(message.key)
            return message.key

    def pump_away() -> None:
        own = Store(postgres_url)  # a process of its own: its own connections
        pump = OutboxPump(own, town, Recorder(), digest_after=1000)

        async def rounds() -> None:
            for _ in range(20):
                await pump.deliver_pending()

        asyncio.run(rounds())
        own.dispose()

    threads = [threading.Thread(target=pump_away) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(posted) == sorted(f"{town}:k{n}" for n in range(60))  # each once
    with store.session() as s:
        delivered = s.exec(select(Delivery)).all()
    assert len(delivered) == 60 and {d.status for d in delivered} == {"sent"}
    store.dispose()


async def test_bench_scale_runs_towns_on_their_schedule(tmp_path: Path) -> None:
    """The scale bench, fast: two towns of three residents, a tick a second standing for a
    minute (the real bench waits 60 s), against the fake LLM server in its own process."""
    from bot.bench.scale import run_scale_bench
    from bot.runtime.settings import load_settings

    settings = load_settings(data_dir=tmp_path / "data", embedder="hash")
    bench = await run_scale_bench(settings, 2, 3, latency_ms=20, minutes=2, tick_s=1.0)
    result = bench.as_json()
    assert result["residents"] == 6 and result["ticks"] == 4
    assert result["peak_rss_mb"] > 50
    # Whether a tick ends in time is the machine's pace, a figure for the bench to print and
    # not for a test to hold; the test holds that the figure counts the ticks it measured.
    late = [t for t in bench.times if t.ended > t.due + t.interval]
    assert result["late_ticks"] == len(late)
    assert result["ticks_on_time_pct"] == round(100 * (4 - len(late)) / 4, 1)
    assert [m["ticks"] for m in result["by_minute"]] == [2, 2]
    assert result["llm_calls"] > 0 and result["fallbacks"] == 0  # the wake-up burst at 07:00
    dues = sorted((t.town, t.due) for t in bench.times)
    assert dues == [(0, 0.0), (0, 1.0), (1, 0.5), (1, 1.5)]  # the towns' phases spread
    assert all(t.began >= t.due for t in bench.times)  # never ahead of the schedule
    assert (tmp_path / "data" / "bench-cache").is_dir()  # founding is kept for the next run


def test_bottown_run_refuses_a_town_a_live_worker_holds(runtime: Any) -> None:
    from bot.runtime.live import _refuse_if_a_worker_runs

    _refuse_if_a_worker_runs(runtime.opened, runtime.settings)  # nobody holds it: fine
    leases = registered(runtime.store, "w1")
    lease = leases.acquire(runtime.town_id)
    assert lease is not None
    with pytest.raises(ValueError, match="bottown worker"):
        _refuse_if_a_worker_runs(runtime.opened, runtime.settings)
    leases.release(lease)
    _refuse_if_a_worker_runs(runtime.opened, runtime.settings)  # given back: fine again


async def test_an_input_on_a_lost_town_commits_nothing(runtime: Any) -> None:
    from town.inputs import visitor
    from town.store.models import AuditEntry

    def lost(session: Any) -> None:
        raise LeaseLost("another worker holds this town")

    engine = runtime.opened.engine
    area = runtime.areas()[0]
    with runtime.store.session() as s:
        before = len(s.exec(select(AuditEntry)).all())
    engine.guard = lost
    with pytest.raises(LeaseLost):
        await visitor.say(
            engine, visitor.Visit.of(area, "Ann", "hello there", platform="web", user_id="ann")
        )
    with runtime.store.session() as s:
        assert len(s.exec(select(AuditEntry)).all()) == before
    engine.guard = None
    await visitor.say(
        engine, visitor.Visit.of(area, "Ann", "hello there", platform="web", user_id="ann")
    )
    with runtime.store.session() as s:
        assert len(s.exec(select(AuditEntry)).all()) > before  # heard and audited


def test_a_town_s_index_is_repaired_from_its_stored_memories(tmp_path: Path) -> None:
    """What a worker does as it takes a town over (``Services.repair_index``): every resident's
    memories that the index lacks are embedded again; other towns' are left alone."""
    from bot.runtime.settings import load_settings
    from bot.runtime.wiring import Services
    from town.memory.embedding_queue import flush_queues
    from town.memory.stream import NewMemory

    settings = load_settings(embedder="hash", brain="offline", data_dir=tmp_path / "data")
    services = Services.open(settings)
    try:
        with services.store.session() as s:
            towns = [add_town(s, f"t{i}", T0) for i in range(2)]
            residents = [add_resident(s, t.id or 0, f"r{i}") for i, t in enumerate(towns)]
            residents.append(add_resident(s, towns[0].id or 0, "r2"))
            for r in residents:
                stream = services.stream(r.id or 0)
                stream.add(s, [NewMemory("seed", f"{r.name} {n}", 5) for n in range(3)], T0)
        streams = [services.stream(r.id or 0) for r in residents]
        flush_queues(services.executor)  # (the writes after the commit are done)
        for stream in streams:
            services.index.drop(stream.collection)  # (the writes a killed worker never made)
        assert services.repair_index(towns[0].id or 0) == 6
        found = [len(services.index.ids(st.collection, st.resident_id)) for st in streams]
        assert found == [3, 0, 3]
        assert services.repair_index(towns[0].id or 0) == 0
    finally:
        services.close()

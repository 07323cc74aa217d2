"""Crash safety: ``bottown run`` killed with SIGKILL at random points of a busy day.

The town (the three residents of tests/data/minitown, offline brain, a tick every 0.2 s) runs on
the web adapter, where visitors keep talking at Hobbs Cafe, and on Slack: the fake Slack Web API
in a thread of this process records every ``chat.postMessage``, each carrying its outbox key in
Slack's message metadata. Before each kill the test reads the database; afterwards it checks that
every memory read then is still there unchanged, that no outbox event was posted twice (counted
at Slack, not from the town's own records), that the clock only ever went on, and that nothing
was left undelivered but what a kill interrupted mid-post (at most once: "unknown", never sent
again). A kill comes at a random moment of the run's start or of its working life; runs go on
past the 20th until the town has done enough work to check, however slow the machine.

Starting Python and importing the town takes ~3 s, so the 20 killed runs are forked from one
process that has imported ``bot.cli.main`` (and nothing else: no thread, no connection): each is a
fresh process running the ``bottown run`` command. The last run, which delivers what is left and
stops cleanly, is the real ``bottown`` console script.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from standins.slack.server import fake_slack_in_thread
from standins.slack.workspace import BOT_TOKEN, FakeSlack
from tests.factories import MINITOWN
from town.outbox.keys import digest_holds, whole_key

KILLS = 20  # at least this many killed runs
BUSY = 40  # and the runs go on until the town has at least this many events
HEARD = 20  # and has heard at least this many visitors' lines
MAX_RUNS = 3 * KILLS  # a town that has not done that much by then is broken
HEAR_CTRL_C = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)
PATIENCE = 180.0  # seconds for a process to reach a state (a busy machine is slow to start one)
BOTTOWN = Path(sys.executable).with_name("bottown")
RUN = ["run", "--town", "mini", "--persona", str(MINITOWN), "-p", "web", "-p", "slack"]

# Reads {"argv": [...], "env": {...}, "log": path} lines; forks a child that runs the command
# with its output in the log; answers with the child's pid. Children are reaped automatically.
ZYGOTE = """
import json, os, signal, sys
import bot.cli.main, bot.runtime.live, adapters.web.server, adapters.slack.adapter
import town.memory.vectors
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
for line in sys.stdin:
    order = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        out = os.open(order["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # line by line, as a terminal
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        os.environ.update(order["env"])
        code = 0
        try:
            bot.cli.main.app(args=order["argv"], prog_name="bottown")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            os._exit(code)
    print(pid, flush=True)
"""


class Zygote:
    """A Python that has imported the town once and forks a fresh ``bottown`` per run."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def start(self, argv: list[str], env: dict[str, str], log: Path) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        order = {"argv": argv, "env": env, "log": str(log)}
        self.proc.stdin.write(json.dumps(order) + "\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(10)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + PATIENCE
    while alive(pid):
        if time.monotonic() >= deadline:  # a generous guard: the state never came
            pytest.fail(f"pid {pid} outlived SIGKILL")
        time.sleep(0.01)


def web_url(log: Path, pid: int) -> str:
    """The web adapter's URL once the run prints it."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        found = re.search(r"Web: (http://127\.0\.0\.1:\d+)", text)
        if found:
            return found.group(1)
        if not alive(pid):
            raise AssertionError(f"bottown run exited early:\n{text[-3000:]}")
        time.sleep(0.02)
    raise AssertionError(f"bottown run served no web page in {PATIENCE:g} s:\n{text[-3000:]}")


def post(url: str, path: str, body: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    request = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return dict(json.loads(response.read()))


@dataclass
class Visitors:
    """Visitors talking at Hobbs Cafe from a thread, until stopped."""

    url: str
    numbers: Iterator[int]  # one count across runs, so every line is unique
    said: list[str] = field(default_factory=list)  # answered 200: committed
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> Visitors:
        self.thread = threading.Thread(target=self._talk, daemon=True)
        self.thread.start()
        return self

    def _talk(self) -> None:
        while not self.stop.is_set():
            n = next(self.numbers)
            text = f"Visitor line {n}: is the coffee good today?"
            body = {"area": "Hobbs Cafe", "visitor_id": f"v{n % 5}", "name": "Vi", "text": text}
            try:
                post(self.url, "/api/say", body)
                self.said.append(text)
            except (OSError, urllib.error.URLError):
                pass  # killed mid-request: the message may or may not have been stored
            self.stop.wait(0.05)

    def heard(self) -> None:
        """Wait until the town has answered one of these visitors' lines."""
        deadline = time.monotonic() + PATIENCE
        while not self.said:
            if time.monotonic() >= deadline:  # a generous guard: the state never came
                pytest.fail(f"no visitor's line answered in {PATIENCE:g} s")
            time.sleep(0.02)

    def halt(self) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(PATIENCE)


@dataclass(frozen=True)
class Snapshot:
    clock: str
    memories: dict[int, tuple[int, str, str]]  # id -> (resident, kind, text)


def read(db: Path) -> Snapshot | None:
    if not db.exists():
        return None
    conn = sqlite3.connect(db, timeout=30)
    try:
        town = conn.execute("select clock from town where name = 'mini'").fetchone()
        if town is None:
            return None
        rows = conn.execute("select id, resident_id, kind, text from memory").fetchall()
        return Snapshot(str(town[0]), {r[0]: (r[1], r[2], r[3]) for r in rows})
    except sqlite3.OperationalError:  # the very first run had not migrated yet
        return None
    finally:
        conn.close()


def query(db: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db, timeout=30)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def work_done(db: Path) -> tuple[int, int, int]:
    """Memories, visitors' lines heard, and town events so far."""
    (found,) = query(
        db,
        "select (select count(*) from memory),"
        " (select count(*) from memory where text like '%Visitor line%'),"
        " (select count(*) from outboxevent)",
    )
    return found


def undelivered(db: Path) -> int:
    """Outbox events the Slack pump has not claimed yet."""
    return int(
        query(
            db,
            "select count(*) from outboxevent o where not exists (select 1 from delivery d "
            "where d.outbox_id = o.id and d.platform = 'slack')",
        )[0][0]
    )


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with fake_slack_in_thread() as fake:
        yield fake


def environment(tmp_path: Path, slack: FakeSlack, policy: str) -> dict[str, str]:
    return {
        "BOTTOWN_DATA_DIR": str(tmp_path / "data"),
        "BOTTOWN_EMBEDDER": "hash",
        "BOTTOWN_BRAIN": "offline",
        "BOTTOWN_TICK_SECONDS": "0.2",
        "BOTTOWN_WEB_PORT": "0",
        "BOTTOWN_SLACK_BOT_TOKEN": BOT_TOKEN,
        "BOTTOWN_SLACK_MODE": "http",
        "BOTTOWN_SLACK_SIGNING_SECRET": "crash-test-secret",
        "BOTTOWN_SLACK_PORT": "0",
        "BOTTOWN_SLACK_API_URL": slack.api_url,
        "BOTTOWN_MISSED_TIME": policy,
        "BOTTOWN_CATCH_UP_TICKS": "4",
        "BOTTOWN_VISITOR_MESSAGES_PER_MINUTE": "0",
        "COLUMNS": "200",
    }


def test_sigkill_at_random_points_loses_nothing_and_posts_nothing_twice(
    tmp_path: Path, slack: FakeSlack
) -> None:
    seed = int(os.environ.get("BOTTOWN_CRASH_SEED", time.time_ns() % 10_000))
    rng = random.Random(seed)
    print(f"crash test seed {seed} (BOTTOWN_CRASH_SEED={seed} repeats it)")
    db = tmp_path / "data" / "bottown.db"
    zygote = Zygote()
    snapshots: list[Snapshot] = []
    numbers = itertools.count(1)
    runs = 0
    try:
        while runs < KILLS or not busy(db, snapshots):
            assert runs < MAX_RUNS, (
                f"after {runs} killed runs the town still had too little to check: "
                f"(memories, visitors' lines heard, events) = {work_done(db)}, "
                f"memories at the first kill: {len(snapshots[0].memories) if snapshots else 0}"
            )
            log = tmp_path / f"run{runs:02d}.log"
            env = environment(tmp_path, slack, "catch-up" if runs % 2 else "jump")
            pid = zygote.start(RUN, env, log)
            visitors = None
            if runs == 0 or rng.random() < 0.75:  # the first run founds the town
                visitors = Visitors(web_url(log, pid), numbers).start()
                visitors.heard()
                time.sleep(rng.uniform(0.0, 2.0))  # a kill while it works
            else:
                time.sleep(rng.uniform(0.0, 1.0))  # a kill while it starts (or soon after)
            snapshot = read(db)  # what is committed now must survive the kill
            kill(pid)
            if visitors is not None:
                visitors.halt()
            assert "Traceback" not in log.read_text(errors="replace"), log.read_text()
            if snapshot is not None:
                snapshots.append(snapshot)
            runs += 1
    finally:
        zygote.close()

    # The last run: the real console script; pause the town, let the outbox drain, stop.
    log = tmp_path / "final.log"
    env = {**os.environ, **environment(tmp_path, slack, "jump"), "PYTHONUNBUFFERED": "1"}
    with log.open("w") as out:  # Ctrl-C's signal as a terminal sends it, heard even when this
        # test runs as a background job (which inherits SIGINT ignored, as a shell's & makes it)
        final = subprocess.Popen(
            [sys.executable, "-c", HEAR_CTRL_C, str(BOTTOWN), *RUN], stdout=out, stderr=out, env=env
        )
    try:
        url = web_url(log, final.pid)
        paused = post(url, "/api/command", {"line": "pause", "visitor_id": "owner"})
        assert paused["ok"], paused
        deadline = time.monotonic() + PATIENCE
        while undelivered(db) or dict(query(db, STATUSES)).get("sending"):
            if time.monotonic() >= deadline:  # a generous guard: the state never came
                pytest.fail(f"{undelivered(db)} events never delivered")
            time.sleep(0.1)
        final.send_signal(signal.SIGINT)
        assert final.wait(PATIENCE) == 0, log.read_text()
    finally:
        if final.poll() is None:
            final.kill()
    assert "Traceback" not in log.read_text(), log.read_text()

    # 1. Every memory committed before a kill is there, unchanged.
    last = read(db)
    assert last is not None and len(snapshots) >= KILLS // 2
    for snapshot in snapshots:
        lost = {i: m for i, m in snapshot.memories.items() if last.memories.get(i) != m}
        assert not lost, f"memories lost or changed after a kill: {list(lost.items())[:3]}"
    heard = sum(1 for _, _, text in last.memories.values() if "Visitor line" in text)
    assert heard >= HEARD and len(last.memories) > len(snapshots[0].memories), heard

    # 2. The clock only went on, across every kill and restart.
    clocks = [s.clock for s in snapshots] + [last.clock]
    assert clocks == sorted(clocks) and clocks[-1] > clocks[0], clocks

    # 3. No outbox event was posted twice (counted at Slack), and none is left undelivered
    #    but those a kill interrupted mid-post ("unknown": never posted again).
    posts = slack.outbox_posts()
    keys = [key for _, key, _ in posts]
    doubled = {k for k in keys if keys.count(k) > 1}
    assert not doubled, f"posted twice: {sorted(doubled)[:5]}"
    events = {key: eid for eid, key, _ in query(db, OUTBOX)}
    assert len(events) >= BUSY, f"a quiet day: {len(events)} town events"  # it was busy
    covered: dict[int, str] = {}  # outbox id -> the post that holds it
    for base in dict.fromkeys(whole_key(key) for key in keys):  # a long text's parts: one
        held = digest_holds(base)  # a digest's key names every event it holds
        if held is None and ":say:" in base:
            continue  # an answer to a visitor posted at once may miss the store if a kill
            # came between: it goes out on its own, never in a digest
        for eid in [events[base]] if held is None else held:
            assert eid not in covered, f"{covered[eid]} and {base} both hold event {eid}"
            covered[eid] = base
    folded = {eid for key in keys if (held := digest_holds(key)) for eid in held}
    replies = {eid for (eid,) in query(db, REPLIES)}  # (residents' talk may fold: the present)
    assert not folded & replies, "a reply to a visitor folded into a digest"
    digested = {eid for (eid,) in query(db, DIGESTED)}  # what the town calls digested, a
    assert digested <= folded, sorted(digested - folded)[:5]  # digest at Slack holds
    statuses = dict(query(db, STATUSES))
    assert statuses.get("sending", 0) == 0, statuses  # every interrupted claim was settled
    assert statuses.get("failed", 0) == 0, statuses
    assert statuses.get("sent", 0) + statuses.get("digested", 0) > 0, statuses
    posted = {ts for _, _, ts in posts}  # and what the town calls posted, Slack has
    for (message_ids,) in query(db, POSTED):
        assert set(message_ids.split(",")) <= posted, message_ids
    # "unknown" only ever comes of a restart finding a claim a kill interrupted (each restart
    # settles them in one statement, one timestamp); a digest's claim covers many events
    settled = query(db, SETTLED)
    assert settled[0][0] <= runs, statuses
    print(
        f"{runs} kills, {len(snapshots)} checked; {len(posts)} Slack posts; deliveries {statuses}"
    )


def busy(db: Path, snapshots: list[Snapshot]) -> bool:
    """Enough work to check: memories grew after the first kill, visitors were heard, the town
    made events."""
    if not snapshots:
        return False
    memories, heard, events = work_done(db)
    return memories > len(snapshots[0].memories) and heard >= HEARD and events >= BUSY


OUTBOX = "select id, idempotency_key, channel from outboxevent"
REPLIES = (
    "select id from outboxevent where kind = 'said' and json_extract(payload, '$.reply_to') "
    "is not null"
)
DIGESTED = "select outbox_id from delivery where platform = 'slack' and status = 'digested'"
STATUSES = "select status, count(*) from delivery where platform = 'slack' group by status"
POSTED = (
    "select message_id from delivery where platform = 'slack' and status in ('sent', 'digested')"
)
SETTLED = (
    "select count(distinct updated_at) from delivery where platform = 'slack' "
    "and status = 'unknown'"
)

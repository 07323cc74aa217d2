"""The audit log: every input and output with its fields, in the transaction of what it records;
filters and streaming exports through ``bottown audit``; retention."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer
from sqlalchemy import insert
from sqlmodel import Session, col, select
from typer.testing import CliRunner

from adapters.core.ports import Caller
from bot.cli import audit as audit_cmds
from bot.cli.audit import audit as audit_command
from bot.runtime.run import TownRuntime
from tests.factories import add_town
from tests.helpers import overtaking
from town.inputs.admin import set_object, whisper
from town.inputs.query import interview
from town.inputs.visit import Visit
from town.outbox import audit
from town.store.db import Store
from town.store.models import AuditEntry, OutboxEvent, Town
from town.text import clean_text, name_of
from town.tick.engine import Engine
from town.views.places import whereabouts

HOBBS = "Hobbs Cafe"
T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)


def entries(store: Store, **where: str) -> list[AuditEntry]:
    with store.session() as s:
        query = select(AuditEntry).order_by(col(AuditEntry.id))
        for key, value in where.items():
            query = query.where(getattr(AuditEntry, key) == value)
        return list(s.exec(query).all())


async def tick_until_awake_at_cafe(runtime: TownRuntime) -> None:
    for _ in range(12):
        seen = await whereabouts(runtime.opened.engine)
        if any(awake for _, _, awake in seen.by_area.get(HOBBS, [])):
            return
        await runtime.opened.engine.tick()
    raise AssertionError("nobody woke up at the cafe")


def clock_of(store: Store) -> datetime:
    with store.session() as s:
        return s.exec(select(Town)).one().clock


# -- what is recorded ---------------------------------------------------------------------------


async def test_a_visitors_words_and_the_answers_are_audited(runtime: TownRuntime) -> None:
    await tick_until_awake_at_cafe(runtime)
    clock = clock_of(runtime.store)
    before = datetime.now(UTC)
    words = "Hello Isabella,\x07 what is\non the menu?"
    await runtime.visitor_says(Visit.of(HOBBS, "Alice\x1b[31m", words, "discord", "4242"))
    (said_in,) = entries(runtime.store, direction="in")
    assert (said_in.kind, said_in.platform, said_in.channel) == ("say", "discord", HOBBS)
    assert said_in.who == "Alice [31m (discord:4242)"  # control characters gone
    assert said_in.text == "Hello Isabella, what is on the menu?"
    assert said_in.game_time == clock and before <= said_in.wall_time <= datetime.now(UTC)
    answers = entries(runtime.store, direction="out")
    with runtime.store.session() as s:
        outbox = s.exec(select(OutboxEvent).where(OutboxEvent.kind == "said")).all()
    assert answers and len(answers) == len(outbox)  # each answer in the outbox is audited
    for row, event in zip(answers, outbox, strict=True):
        assert (row.kind, row.who, row.text) == (
            "reply",
            event.payload["resident"],
            f"(to Alice [31m) {event.payload['text']}",
        )
        assert row.channel == HOBBS and row.platform == "" and row.game_time == clock


async def test_commands_whispers_sets_and_interviews_are_audited(runtime: TownRuntime) -> None:
    await tick_until_awake_at_cafe(runtime)
    engine, store = runtime.opened.engine, runtime.store
    member = Caller("slack", "U1", "Bob", location=HOBBS)
    await runtime.command(member, "look")
    await runtime.command(Caller("web", "page", "the page", automatic=True), "where")
    await runtime.command(member, "dance wildly")  # a bad command is still a command typed
    await whisper(engine, "Klaus", "go read in the park", by="Ada", platform="web", user_id="a1")
    await set_object(
        engine, "Hobbs Cafe: kitchen: stove", "on fire", by="Ada", platform="web", user_id="a1"
    )
    answer = await interview(
        engine, "Isabella", "What\x00 do you think of Klaus?", "Bob", platform="slack", user_id="U1"
    )
    clock = clock_of(store)
    rows = [(e.direction, e.kind, e.platform, e.channel, e.who, e.text) for e in entries(store)]
    assert rows == [
        ("in", "command", "slack", HOBBS, "Bob (slack:U1)", "look"),
        ("in", "command", "slack", HOBBS, "Bob (slack:U1)", "dance wildly"),
        ("in", "whisper", "web", HOBBS, "Ada (web:a1)", "Klaus Mueller: go read in the park"),
        ("in", "set", "web", HOBBS, "Ada (web:a1)", "Hobbs Cafe: kitchen: stove = on fire"),
        (
            "in",
            "interview",
            "slack",
            HOBBS,
            "Bob (slack:U1)",
            "Isabella Rodriguez: What do you think of Klaus?",
        ),
        ("out", "answer", "slack", HOBBS, "Isabella Rodriguez", clean_text(answer)),
    ]
    assert all(e.game_time == clock for e in entries(store))


async def test_a_rolled_back_tick_leaves_no_audit_row_and_a_committed_one_all(
    runtime: TownRuntime,
) -> None:
    engine, store = runtime.opened.engine, runtime.store
    pending: list[int] = []

    def refuse_ticks_with_words(session: Session) -> None:
        pending.append(len(session.exec(select(AuditEntry)).all()))  # this tick's, uncommitted
        if pending[-1]:
            raise RuntimeError("the worker lost its lease")  # as a lease guard would

    engine.guard = refuse_ticks_with_words
    for _ in range(12):
        try:
            await engine.tick()
        except RuntimeError:
            break
    assert pending[-1] > 0, "no tick had words to say"
    assert entries(store) == []
    with store.session() as s:  # the tick is gone whole: its outbox rows too
        assert s.exec(select(OutboxEvent).where(OutboxEvent.kind == "said")).all() == []
    engine.guard = None
    report = await engine.tick()  # the same tick again, committed this time
    said = [e for e in report.events if e.kind == "said"]
    assert said and [(e.resident, e.text) for e in said] == [
        (r.who, r.text) for r in entries(store, kind="said")
    ]


# -- bottown audit ------------------------------------------------------------------------------


def seed(store: Store) -> None:
    """Two towns and rows whose wall times the filters can tell apart."""
    with store.session() as s:
        mini, other = (add_town(s, name, T0).id for name in ("mini", "other"))
        assert mini is not None and other is not None
        rows: list[tuple[int, str, str, str, str, str, str, int]] = [
            (mini, "in", "say", "discord", HOBBS, "Alice (discord:1)", "hello 100% real", 50),
            (mini, "out", "said", "", HOBBS, "Isabella Rodriguez", '=HYPERLINK("x")', 49),
            (mini, "in", "say:limited", "discord", HOBBS, "Alice (discord:1)", "spam", 48),
            (mini, "in", "command", "slack", "Park", "Bob (slack:U1)", "look", 30),
            (mini, "in", "whisper", "web", "Park", "ALICIA (web:x)", "Klaus: go", 2),
            (other, "in", "say", "web", "Square", "Carol (web:c)", "hi there", 1),
        ]
        for town_id, direction, kind, platform, channel, who, text, hours_ago in rows:
            s.add(
                AuditEntry(
                    town_id=town_id,
                    direction=direction,
                    kind=kind,
                    platform=platform,
                    channel=channel,
                    who=who,
                    text=text,
                    game_time=T0,
                    wall_time=datetime.now(UTC) - timedelta(hours=hours_ago),
                )
            )


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[CliRunner, typer.Typer, Store]:
    monkeypatch.setenv("BOTTOWN_DATA_DIR", str(tmp_path / "data"))
    store = Store.open(f"sqlite:///{tmp_path / 'data' / 'bottown.db'}")
    app = typer.Typer()
    app.command()(audit_command)
    return CliRunner(), app, store


def jsonl(runner: CliRunner, app: typer.Typer, *args: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["--format", "jsonl", *args])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_filters_through_the_command(cli: tuple[CliRunner, typer.Typer, Store]) -> None:
    runner, app, store = cli
    seed(store)
    texts = lambda *args: [r["text"] for r in jsonl(runner, app, *args)]  # noqa: E731
    assert len(texts()) == 6
    assert texts("--town", "other") == ["hi there"]
    assert texts("--direction", "out") == ['=HYPERLINK("x")']
    assert texts("--who", "alic") == ["hello 100% real", "spam", "Klaus: go"]  # any case
    assert texts("--who", "discord:1", "--kind", "say") == ["hello 100% real", "spam"]
    assert texts("--kind", "say:limited") == ["spam"]
    assert texts("--platform", "SLACK") == ["look"]
    assert texts("--channel", "park") == ["look", "Klaus: go"]
    assert texts("--text-contains", "100%") == ["hello 100% real"]  # % is not a wildcard
    assert texts("--text-contains", "0%r") == []
    assert texts("--last", "24h") == ["Klaus: go", "hi there"]
    assert texts("--last", "1.5d") == ["look", "Klaus: go", "hi there"]
    since = (datetime.now(UTC) - timedelta(hours=49, minutes=30)).isoformat()
    until = (datetime.now(UTC) - timedelta(hours=10)).strftime("%Y-%m-%dT%H:%M:%S")  # naive: UTC
    assert texts("--since", since, "--until", until) == ['=HYPERLINK("x")', "spam", "look"]
    assert texts("--limit", "2") == ["Klaus: go", "hi there"]  # the most recent, oldest first
    first = jsonl(runner, app, "--town", "mini", "--limit", "1")[0]
    assert set(first) == set(audit_cmds.COLUMNS) and first["town"] == "mini"
    assert datetime.fromisoformat(first["game_time"]) == T0


def test_csv_and_table_exports(cli: tuple[CliRunner, typer.Typer, Store], tmp_path: Path) -> None:
    runner, app, store = cli
    seed(store)
    target = tmp_path / "exports" / "audit.csv"
    result = runner.invoke(app, ["--format", "csv", "--output", str(target), "--town", "mini"])
    assert result.exit_code == 0 and "wrote 5 audit entries" in result.stdout
    read = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"))))
    assert [r["kind"] for r in read] == ["say", "said", "say:limited", "command", "whisper"]
    assert read[1]["text"] == '\'=HYPERLINK("x")'  # no formula runs in a spreadsheet
    assert read[0]["who"] == "Alice (discord:1)" and read[0]["channel"] == HOBBS
    assert not (tmp_path / "exports" / "audit.csv.part").exists()
    table = runner.invoke(app, ["--direction", "in", "--limit", "2"], env={"COLUMNS": "250"})
    assert table.exit_code == 0, table.output
    assert "Klaus: go" in table.stdout and "hi there" in table.stdout and "look" not in table.stdout
    assert "2 of 5 matching entries (the most recent" in table.stdout


def test_bad_options_get_clear_errors_and_write_nothing(
    cli: tuple[CliRunner, typer.Typer, Store], tmp_path: Path
) -> None:
    runner, app, store = cli
    seed(store)
    target = tmp_path / "out.jsonl"
    cases = {
        ("--since", "yesterday"): "--since: 'yesterday' is not an ISO 8601 time",
        ("--last", "3 fortnights"): "--last: '3 fortnights' is not a span",
        ("--since", "2026-11-01", "--last", "1h"): "give --since or --last, not both",
        ("--since", "2026-11-02", "--until", "2026-11-01"): "must come before --until",
        ("--direction", "sideways"): "--direction must be in or out",
        ("--format", "xml"): "--format must be one of table, jsonl, csv",
        ("--town", "atlantis"): "no town named 'atlantis'; towns: mini, other",
        ("--limit", "0"): "--limit must be at least 1",
    }
    for args, message in cases.items():
        result = runner.invoke(app, [*args, "--output", str(target)])
        assert result.exit_code == 2, (args, result.output)
        assert message in " ".join(result.stderr.split()), (args, result.stderr)
        assert not target.exists()


def test_an_export_streams_in_constant_memory(store: Store, tmp_path: Path) -> None:
    with store.session() as s:
        town_id = add_town(s, "big", T0).id
    text = "a visitor says something of a typical length to a resident at the cafe " * 2

    def grow_to(n: int) -> None:
        with store.session() as s:
            have = len(s.exec(select(AuditEntry.id)).all())
            s.execute(
                insert(AuditEntry),
                [
                    {
                        "town_id": town_id,
                        "direction": "in",
                        "kind": "say",
                        "platform": "web",
                        "channel": HOBBS,
                        "who": f"visitor {i} (web:{i})",
                        "text": f"{i}: {text}",
                        "game_time": T0,
                        "wall_time": T0 + timedelta(seconds=i),
                    }
                    for i in range(have, n)
                ],
            )

    def peak_of_export(path: Path) -> tuple[int, int]:
        tracemalloc.start()
        try:
            written = audit_cmds.export(store, audit.AuditFilter(), "jsonl", path)
            return written, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    grow_to(2_000)
    small, small_peak = peak_of_export(tmp_path / "small.jsonl")
    grow_to(20_000)
    large, large_peak = peak_of_export(tmp_path / "large.jsonl")
    assert (small, large) == (2_000, 20_000)
    assert sum(1 for _ in (tmp_path / "large.jsonl").open(encoding="utf-8")) == 20_000
    assert large_peak < small_peak * 1.5, (small_peak, large_peak)  # not 10x: it streams


# -- retention ----------------------------------------------------------------------------------


def test_prune_keeps_what_retention_keeps(
    cli: tuple[CliRunner, typer.Typer, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    runner, app, store = cli
    with store.session() as s:
        towns = [add_town(s, name, T0) for name in ("mini", "other")]
        for town in towns:
            assert town.id is not None
            for days in (200, 100, 40, 10, 0):
                s.add(
                    AuditEntry(
                        town_id=town.id,
                        direction="in",
                        kind="say",
                        who="Alice",
                        text=f"{days} days ago",
                        game_time=T0,
                        wall_time=datetime.now(UTC) - timedelta(days=days, minutes=1),
                    )
                )
        mini = towns[0].id
    assert audit.prune(store, mini, 0) == 0 and len(entries(store)) == 10  # 0: forever
    monkeypatch.setattr(audit, "PRUNE_BATCH", 1)  # batches: one row a transaction
    assert audit.prune(store, mini, 30) == 3
    left = [(e.town_id, e.text) for e in entries(store)]
    assert (mini, "10 days ago") in left and (mini, "40 days ago") not in left
    assert len([t for t, _ in left if t != mini]) == 5  # the other town is untouched
    monkeypatch.setenv("BOTTOWN_AUDIT_RETENTION_DAYS", "150")
    result = runner.invoke(app, ["--prune"])
    assert result.exit_code == 0 and "pruned 1 audit entries older than 150 days" in result.stdout
    assert next(e.text for e in entries(store) if e.town_id != mini) == "100 days ago"
    monkeypatch.setenv("BOTTOWN_AUDIT_RETENTION_DAYS", "0")
    kept = runner.invoke(app, ["--prune"])
    assert "kept forever" in kept.stdout and len(entries(store)) == 6


def test_identity_names_people_without_leaking_control_text(store: Store) -> None:
    assert audit.identity("Alice", "discord", "1") == "Alice (discord:1)"
    assert audit.identity("", "cli") == "someone (cli)" and audit.identity("") == "someone"
    assert audit.identity(name_of("A\nB"), "web", "x\ty") == "A B (web:x y)"
    with pytest.raises(ValueError, match="direction must be in or out"), store.session() as s:
        audit.record(s, 1, "sideways", "say", "x", "y", game_time=T0)


async def test_a_running_town_prunes_at_start_and_then_daily(runtime: TownRuntime) -> None:
    engine, store = runtime.opened.engine, runtime.store

    def add_old(text: str, days: int) -> None:
        with store.session() as s:
            s.add(
                AuditEntry(
                    town_id=engine.town_id,
                    direction="in",
                    kind="say",
                    who="Alice",
                    text=text,
                    game_time=T0,
                    wall_time=datetime.now(UTC) - timedelta(days=days),
                )
            )

    async def until_gone(text: str) -> None:
        for _ in range(200):
            if text not in [e.text for e in entries(store)]:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{text!r} was never pruned")

    await audit.keep_pruned(engine, 0)  # 0 days: keep forever, nothing to run
    add_old("ancient", 100)
    add_old("recent", 1)
    task = asyncio.create_task(audit.keep_pruned(engine, 30, every_s=0.05))
    try:
        await until_gone("ancient")  # at start
        add_old("ancient later", 31)
        await until_gone("ancient later")  # and on the next round
        assert [e.text for e in entries(store)] == ["recent"]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_words_and_commands_another_process_overtook_are_done_again_once(
    runtime: TownRuntime, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither a visitor's message nor an admin's whisper writes what a tick writes (the
    whisper waits as a pending input for the next tick), so another process's tick never
    overtakes them: each is done and audited once."""
    await tick_until_awake_at_cafe(runtime)
    times = [1]
    monkeypatch.setattr(Engine, "unit", overtaking(times))
    await runtime.visitor_says(Visit.of(HOBBS, "Alice", "Hello Isabella", "discord", "4242"))
    (said_in,) = entries(runtime.store, direction="in", kind="say")
    assert said_in.text == "Hello Isabella" and times == [1]
    admin = Caller("web", "u2", "Ada", is_admin=True, location=HOBBS)
    times[0] = 1
    reply = await runtime.command(admin, 'whisper Isabella "call Klaus"')
    assert reply.ok and "inner voice" in reply.text and times == [1]
    (whispered,) = entries(runtime.store, direction="in", kind="whisper")
    assert "call Klaus" in whispered.text

"""``bottown backup`` while a town writes, and ``bottown restore`` into a fresh data folder."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlmodel import col, func, select
from typer.testing import CliRunner

from bot.cli.main import app
from bot.runtime.backup import MANIFEST, back_up, restore
from bot.runtime.settings import Settings
from bot.runtime.towns import open_town, simulate
from tests.factories import MINITOWN
from town.memory.vectors import ChromaIndex
from town.store.models import Delivery, Memory, OutboxEvent, Resident, Town

runner = CliRunner()
NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)


def settings(data: Path) -> Settings:
    return Settings(data_dir=data, embedder="hash", brain="offline")


async def lived_town(data: Path, persona: Path) -> None:
    """A town of its own (``persona``) after a game hour, its delivered events recorded."""
    opened = await open_town(settings(data), "mini", persona=str(persona), create=True)
    await simulate(opened, opened.town.clock.replace(hour=8), data / "replays" / "mini.jsonl")
    with opened.services.store.session() as s:
        for event in s.exec(select(OutboxEvent).limit(5)).all():
            event.delivered_at = NOW
            s.add(Delivery(outbox_id=event.id or 0, platform="web", status="sent"))
    opened.services.close()
    ChromaIndex.release_all()


def rows(data: Path) -> dict[str, object]:
    """What must come back whole: every memory, outbox row and delivery, and the vectors."""
    db = sqlite3.connect(data / "bottown.db")
    found: dict[str, object] = {
        table: db.execute(f"select * from {table} order by id").fetchall()
        for table in ("memory", "outboxevent", "delivery", "town")
    }
    db.close()
    return found


async def test_a_backup_while_the_town_writes_restores_whole(tmp_path: Path) -> None:
    persona = tmp_path / "mytown"
    shutil.copytree(MINITOWN, persona)
    live, copy, fresh = tmp_path / "live", tmp_path / "copy", tmp_path / "fresh"
    await lived_town(live, persona)
    # a memory whose vector the index has not been given yet (written after each commit)
    db = sqlite3.connect(live / "bottown.db", isolation_level=None)
    db.execute(
        "insert into memory (id, resident_id, kind, text, created, last_access, importance, "
        "cites, private) values (100000, 1, 'observation', 'a late thought', "
        "'2023-02-13 08:00:00', '2023-02-13 08:00:00', 4, '[]', 0)"
    )
    before = rows(live)
    # the town is in the middle of a write while the copy is made: the copy has none of it
    db.execute("begin immediate")
    db.execute("update town set revision = revision + 1000")
    manifest = back_up(settings(live), copy, NOW)
    db.execute("commit")
    db.close()
    assert rows(copy) == before
    assert manifest.counts == {
        "towns": 1,
        "residents": 3,
        "memories": len(before["memory"]),  # type: ignore[arg-type]
        "outbox": len(before["outboxevent"]),  # type: ignore[arg-type]
    }
    assert manifest.personas == {"personas/1-mytown": str(persona)}
    assert manifest.replays == ["replays/mini.jsonl"]

    shutil.rmtree(persona)  # the persona folder is lost with the machine
    restored = restore(settings(fresh), copy)
    assert restored.reembedded == 1  # the late thought's vector, embedded again
    assert rows(fresh) == before
    assert (persona / "residents.toml").is_file()
    opened = await open_town(settings(fresh), "mini")
    try:
        with opened.services.store.session() as s:
            for resident in s.exec(select(Resident.id)).all():
                assert resident is not None
                stream = opened.services.stream(resident)
                have = opened.services.index.ids(stream.town_collection(s), resident)
                ids = s.exec(select(Memory.id).where(col(Memory.resident_id) == resident)).all()
                assert sorted(have.tolist()) == sorted(ids)
            undelivered = s.exec(
                select(func.count()).where(col(OutboxEvent.delivered_at).is_(None))
            ).one()
        assert undelivered == manifest.counts["outbox"] - 5  # delivered ones are not sent again
        await simulate(opened, opened.town.clock.replace(hour=9), fresh / "replays" / "mini.jsonl")
        with opened.services.store.session() as s:
            assert s.exec(select(Town)).one().clock.hour == 9  # the town goes on
    finally:
        opened.services.close()
        ChromaIndex.release_all()


def test_restore_refuses_a_newer_backup_and_a_used_folder(tmp_path: Path) -> None:
    persona = tmp_path / "mytown"
    shutil.copytree(MINITOWN, persona)
    asyncio.run(lived_town(Path("data"), persona))
    made = runner.invoke(app, ["backup", "bk"])
    assert made.exit_code == 0 and "backed up to bk: schema" in made.output
    used = runner.invoke(app, ["restore", "bk"])  # into the folder it came from
    assert used.exit_code == 2 and "restore into a fresh data folder" in used.output
    file = Path("bk") / MANIFEST
    manifest = json.loads(file.read_text())
    file.write_text(json.dumps({**manifest, "schema": ["9999"], "version": "9.0.0"}))
    newer = runner.invoke(app, ["restore", "bk"], env={"BOTTOWN_DATA_DIR": "fresh"})
    assert newer.exit_code == 2
    (line,) = newer.output.splitlines()
    assert "made by a newer bottown (9.0.0, schema revision 9999)" in line
    assert not Path("fresh").exists()
    again = runner.invoke(app, ["backup", "bk"])
    assert again.exit_code == 2 and "bk is not empty" in again.output


def test_a_folder_that_is_no_backup_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    Path("nothing").mkdir()
    result = runner.invoke(app, ["restore", "nothing"])
    assert result.exit_code == 2 and "nothing is not a bottown backup" in result.output

"""Upgrades: a database an earlier bottown wrote (``tests/data/old_store``) is copied, then
upgraded with nothing lost; a copy of PostgreSQL's goes through pg_dump."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest
from sqlmodel import col, select

from town.store.db import Store, StoreError, code_heads
from town.store.models import ChatLine, Memory, OutboxEvent, Resident, Town, Visitor
from town.store.snapshot import SnapshotError, dump_postgres

OLD = Path(__file__).parents[2] / "data" / "old_store" / "store-0009.db"


def test_an_earlier_database_is_backed_up_then_upgraded_with_nothing_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / "bottown.db"
    shutil.copy(OLD, file)
    with caplog.at_level(logging.WARNING, logger="town.store.db"):
        store = Store.open(f"sqlite:///{file}", backups=tmp_path / "backups")
    assert store.revision() == code_heads() != {"0009"}
    with store.session() as s:
        town = s.exec(select(Town)).one()
        residents = s.exec(select(Resident).order_by(col(Resident.id))).all()
        memories = s.exec(select(Memory).order_by(col(Memory.id))).all()
        outbox = s.exec(select(OutboxEvent).order_by(col(OutboxEvent.id))).all()
        visitor = s.exec(select(Visitor)).one()
        line = s.exec(select(ChatLine)).one()
    assert (town.name, town.revision, town.clock.hour) == ("oldtown", 7, 9)
    assert town.persona_revision == 0  # a column the upgrade added, at its default
    assert [r.name for r in residents] == ["Isabella Rodriguez", "Klaus Mueller"]
    assert residents[0].persona == {"age": 34}
    assert [(m.kind, m.importance, m.private) for m in memories] == [
        ("seed", 8, False),
        ("observation", 3, False),
        ("reflection", 6, True),
    ]
    assert memories[2].cites == [1, 2]
    assert [e.delivered_at is None for e in outbox] == [False, True]  # one still to deliver
    assert (visitor.display_name, line.text) == ("Alice", "Hi Isabella!")

    (backup,) = (tmp_path / "backups").iterdir()
    assert backup.name.startswith("bottown-0009-") and backup.suffix == ".db"
    with sqlite3.connect(backup) as copy:
        assert copy.execute("select version_num from alembic_version").fetchall() == [("0009",)]
        assert copy.execute("select count(*) from memory").fetchone() == (3,)
    copy.close()
    (said,) = [r.getMessage() for r in caplog.records]
    assert "from schema 0009" in said and str(backup) in said

    Store.open(f"sqlite:///{file}", backups=tmp_path / "backups")  # up to date: no more copies
    assert len(list((tmp_path / "backups").iterdir())) == 1


def test_a_new_database_is_made_without_a_backup(tmp_path: Path) -> None:
    Store.open(f"sqlite:///{tmp_path / 'bottown.db'}", backups=tmp_path / "backups")
    assert not (tmp_path / "backups").exists()


def fake_pg_dump(folder: Path) -> None:
    """A pg_dump that writes its arguments to the file it is given."""
    program = folder / "pg_dump"
    program.write_text(
        "#!/bin/sh\n"
        'while [ "$1" != "--file" ]; do shift; done\n'
        'out="$2"; shift 2\n'
        'echo "$@" > "$out"\n'
    )
    program.chmod(program.stat().st_mode | stat.S_IEXEC)


def test_postgres_is_dumped_with_a_url_pg_dump_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_pg_dump(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    dump_postgres("postgresql+psycopg://town:pw@127.0.0.1:5432/bottown", tmp_path / "db.pgdump")
    assert (tmp_path / "db.pgdump").read_text().split() == [
        "postgresql://town:pw@127.0.0.1:5432/bottown"
    ]


def test_postgres_without_pg_dump_is_not_upgraded_unbacked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no pg_dump here
    with pytest.raises(SnapshotError, match="pg_dump is not on the PATH"):
        dump_postgres("postgresql+psycopg://town@127.0.0.1/bottown", tmp_path / "db.pgdump")
    store = Store("postgresql+psycopg://town@127.0.0.1/bottown")
    with pytest.raises(StoreError, match="migrate --no-backup"):
        store._back_up_before_upgrade({"0009"}, tmp_path)

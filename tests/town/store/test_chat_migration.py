"""Upgrading a town whose visitors' chats lived in the audit log: the words and answers become
chat lines under the same ids, and each resident's place in what it heard still holds."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlmodel import col, select

from tests.factories import add_resident, add_town
from town.outbox import audit
from town.store.db import Store
from town.store.models import ChatLine, Resident

pytest_plugins = ["tests.servers"]  # postgres_url: a fresh database on a real server
T0 = datetime(2023, 2, 13, 9, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'town.db'}"
    return str(request.getfixturevalue("postgres_url"))


def test_visitors_words_and_answers_move_from_the_audit_log_to_chat_lines(url: str) -> None:
    store = Store.open(url)
    with store.engine.begin() as conn:  # as a database of the last release was
        conn.execute(text("drop table chatline"))
        conn.execute(text("update alembic_version set version_num = '0008'"))
    with store.session() as s:
        town = add_town(s, "old", T0)
        assert town.id is not None
        rows = [
            (audit.IN, audit.SAY, "Alice (web:a1)", "Hi Klaus!"),
            (audit.IN, "command", "Bo (slack:U1)", "look"),
            (audit.OUT, audit.REPLY, "Klaus Mueller", audit.reply_line("Alice", "Hello Alice.")),
            (audit.IN, audit.LIMITED, "Alice (web:a1)", "too fast"),
            (audit.IN, audit.SAY, "Alice (web:a1)", "Said after the last tick"),
        ]
        for direction, kind, who, words in rows:
            audit.record(
                s,
                town.id,
                direction,
                kind,
                who,
                words,
                game_time=T0,
                platform="web",
                channel="Cafe",
            )
        add_resident(s, town.id, "Klaus Mueller", state={"heard": 3})  # read up to "command"
    store.engine.dispose()

    store = Store.open(url)
    with store.session() as s:
        lines = s.exec(select(ChatLine).order_by(col(ChatLine.id))).all()
        klaus = s.exec(select(Resident)).one()
    assert [
        (ln.id, ln.kind, ln.speaker, ln.addressee, ln.thread, ln.text, ln.heard) for ln in lines
    ] == [
        (1, "visitor", "Alice", "", "web:a1", "Hi Klaus!", True),
        (3, "resident", "Klaus Mueller", "Alice", "web:a1", "Hello Alice.", True),
        (4, "visitor", "Alice", "", "web:a1", "too fast", False),
        (5, "visitor", "Alice", "", "web:a1", "Said after the last tick", True),
    ]
    assert klaus.state["heard"] == 3  # line 5 is still to be heard
    with store.session() as s:  # a new line comes after every copied one
        new = ChatLine(
            town_id=1,
            area="Cafe",
            speaker="Cy",
            kind="visitor",
            thread="web:c",
            text="hi",
            game_time=T0,
        )
        s.add(new)
    assert new.id == 6


def test_a_resident_that_heard_past_every_copied_line_hears_every_new_one(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'town.db'}"
    store = Store.open(url)
    with store.engine.begin() as conn:
        conn.execute(text("drop table chatline"))
        conn.execute(text("update alembic_version set version_num = '0008'"))
    with store.session() as s:
        town = add_town(s, "old", T0)
        assert town.id is not None
        audit.record(s, town.id, audit.IN, audit.SAY, "Al (web:a)", "hi", game_time=T0, channel="C")
        for n in range(5):
            audit.record(s, town.id, audit.IN, "command", "Al (web:a)", f"look {n}", game_time=T0)
        add_resident(s, town.id, "Klaus Mueller", state={"heard": 6})  # the audit log's newest
    store.engine.dispose()
    store = Store.open(url)
    with store.session() as s:
        assert s.exec(select(Resident)).one().state["heard"] == 1

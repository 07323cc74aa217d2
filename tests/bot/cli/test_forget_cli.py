"""``bottown forget --who W``: the member forgotten in the store, the replay and Chroma; an
unknown name said so, exit 2, nothing changed."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import select
from typer.testing import CliRunner

from bot.cli.main import app
from bot.runtime.settings import load_settings
from tests.factories import MINITOWN
from tests.town.features.consent.support import traces
from town.store.db import Store
from town.store.models import ForgetOrder, Memory, Visitor

runner = CliRunner()
WORDS = "my cousin juggles marmalade jars"


def test_forget_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    sim = ["simulate", "--town", str(MINITOWN), "--name", "mini", "--days", "0.06"]
    assert runner.invoke(app, sim).exit_code == 0
    said = runner.invoke(
        app, ["say", "Hobbs Cafe", f"Isabella, {WORDS}", "--as", "Wren Hollis", "--town", "mini"]
    )
    assert said.exit_code == 0, said.output
    on = runner.invoke(app, ["simulate", "--town", "mini", "--days", "0.07"])
    assert on.exit_code == 0, on.output
    settings = load_settings()
    store = Store.open(settings.resolved_database_url)
    with store.session() as s:
        assert any(WORDS in m.text for m in s.exec(select(Memory)))
    store.dispose()

    nobody = runner.invoke(app, ["forget", "--who", "Nobody Known", "--town", "mini"])
    assert nobody.exit_code == 2 and "nothing was changed" in nobody.output

    done = runner.invoke(app, ["forget", "--who", "wren hollis", "--town", "mini"])
    assert done.exit_code == 0 and "forgotten" in done.output, done.output
    store = Store.open(settings.resolved_database_url)
    with store.session() as s:
        assert not any(WORDS in m.text or "Wren" in m.text for m in s.exec(select(Memory)))
        assert s.exec(select(Visitor)).first() is None
    assert traces(store, ["Wren", WORDS]) == []  # every table: the first name an answer used too
    store.dispose()
    replays = list(Path(settings.data_dir).glob("**/*.jsonl"))
    assert replays and not any("Wren" in p.read_text(encoding="utf-8") for p in replays)


def test_a_forget_recorded_before_a_crash_finishes_when_the_town_next_opens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    sim = ["simulate", "--town", str(MINITOWN), "--name", "mini", "--days", "0.06"]
    assert runner.invoke(app, sim).exit_code == 0
    said = ["say", "Hobbs Cafe", f"Isabella, {WORDS}", "--as", "Wren", "--town", "mini"]
    assert runner.invoke(app, said).exit_code == 0
    settings = load_settings()
    store = Store.open(settings.resolved_database_url)
    with store.session() as s:  # the order, committed; the process died before erasing
        s.add(ForgetOrder(town_id=1, platform="cli", platform_user_id="Wren", names=["Wren"]))
    store.dispose()

    assert runner.invoke(app, ["cmd", "time", "--town", "mini"]).exit_code == 0
    store = Store.open(settings.resolved_database_url)
    with store.session() as s:
        assert s.exec(select(Visitor)).first() is None
        assert s.exec(select(ForgetOrder)).one().done_at is not None
    store.dispose()

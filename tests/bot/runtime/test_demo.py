"""The served demo's scenario: where it opens in game time, and how soon the party comes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console
from sqlmodel import select

from bot.runtime.demo import minutes_to, run_up_left, warm_demo
from bot.runtime.settings import Settings
from town.store.db import Store
from town.store.models import Town
from town.world.load import load_town


def test_the_default_demo_reaches_the_party_within_fifteen_minutes() -> None:
    settings = Settings()
    party = load_town("smallville").scenario.events[0]
    opens = datetime.fromisoformat(settings.demo_start).replace(tzinfo=UTC)
    wait = minutes_to(party.starts_at, opens, 10, settings.demo_tick_seconds)
    assert party.location == "Hobbs Cafe" and opens < party.starts_at
    assert 0 < wait <= 15


def test_minutes_to_counts_ticks_at_the_pace() -> None:
    now = datetime(2023, 2, 14, 9, 0, tzinfo=UTC)
    assert minutes_to(datetime(2023, 2, 14, 17, 0, tzinfo=UTC), now, 10, 4.0) == 3.2
    assert minutes_to(now, datetime(2023, 2, 14, 10, 0, tzinfo=UTC), 10, 4.0) == 0


def test_the_run_up_says_how_long_its_rest_takes_once_a_tenth_is_measured() -> None:
    assert run_up_left(9.0, 3, 156) is None  # the waking ticks alone would say 7 minutes
    assert run_up_left(20.0, 16, 156) == "the run-up takes about 3 minutes more"
    assert run_up_left(8.0, 16, 156) == "the run-up takes about a minute more"
    assert run_up_left(4.0, 16, 156) is None  # under a minute: the bar says enough
    assert run_up_left(1.0, 1, 6) is None and run_up_left(60.0, 6, 6) is None


def test_a_start_that_is_no_game_time_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="is not a game time"):
        Settings(demo_start="tuesday")


async def test_the_demo_lives_headless_up_to_its_start(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path, embedder="hash", brain="offline", demo_start="2023-02-13 08:30"
    )
    out = Console(record=True, width=200)
    await warm_demo(settings, out)
    lines = (tmp_path / "replay.jsonl").read_text(encoding="utf-8").splitlines()
    last = max(datetime.fromisoformat(json.loads(line)["at"]) for line in lines)
    assert last == datetime(2023, 2, 13, 8, 30, tzinfo=UTC)  # its last tick: at 08:30
    assert "from Mon 07:00 to Mon 08:30" in out.export_text()
    store = Store.open(settings.resolved_database_url)
    try:
        with store.session() as session:  # the page welcomes the newcomer to Smallville
            assert [t.name for t in session.exec(select(Town)).all()] == ["Smallville"]
    finally:
        store.dispose()


async def test_the_run_up_thinks_offline_with_a_model_configured(tmp_path: Path) -> None:
    """A model on a server that never answers (nothing listens on the port): the run-up never
    calls it, says so, and shows its progress in ticks."""
    settings = Settings(
        data_dir=tmp_path,
        embedder="hash",
        llm_base_url="http://127.0.0.1:9/v1",
        llm_model="slow-model",
        demo_start="2023-02-13 08:00",
    )
    assert settings.uses_llm and settings.demo_run_up == "offline"
    out = Console(record=True, width=200)
    await warm_demo(settings, out)
    said = out.export_text()
    assert "the run-up thinks on the offline brain" in said
    assert "slow-model thinks from the moment the page opens" in said
    assert "6/6 ticks" in said and "Mon 08:00" in said  # 07:00 to 08:00, 10 minutes a tick

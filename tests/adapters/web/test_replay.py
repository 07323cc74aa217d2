"""A recorded run read for the page, and ``bottown replay``'s own server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.web.replay import ReplayError, ReplayPage, read_replay, town_replay
from town.views.card import MapPlace


def line(at: str, kind: str, channel: str, **payload: Any) -> str:
    return json.dumps(
        {"at": f"2023-02-13T{at}:00+00:00", "kind": kind, "channel": channel, **payload}
    )


def write(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_events_are_read_in_time_order_with_where_they_leave_a_resident(tmp_path: Path) -> None:
    path = write(
        tmp_path / "run.jsonl",
        line(
            "07:30",
            "action",
            "Cafe",
            resident="Ann Lee",
            text="Ann Lee is baking bread",
            emoji="🍞",
        ),
        "not json",
        line(
            "07:00",
            "moved",
            "Home",
            resident="Ann Lee",
            text="Ann Lee left for Cafe",
            to="Cafe: kitchen",
        ),
        line("07:40", "said", "Cafe", resident="Ann Lee", text="Fresh bread!", emoji="💬"),
        line("07:50", "notice", "Cafe", text="Bob, slow down", for_platform="web"),
        line("08:00", "planned", "Cafe", resident="Ann Lee", text="Ann Lee's plan", plan=[]),
        json.dumps({"kind": "said"}),  # no time, no channel
    )
    replay = read_replay(path)
    assert replay.skipped == 2
    assert [e["kind"] for e in replay.events] == ["moved", "action", "said", "notice", "planned"]
    moved, action, said, notice, planned = replay.events
    assert (moved["area"], moved["shown"]) == (
        "Cafe",
        {"author": "", "text": "Ann Lee left for Cafe", "channel": "Home"},
    )
    assert (action["action"], action["emoji"], action["clock"]) == ("baking bread", "🍞", "07:30")
    assert said["shown"] == {"author": "Ann Lee", "text": "Fresh bread!", "channel": "Cafe"}
    assert "shown" not in notice and "shown" not in planned  # one visitor's; not in channels
    assert replay.areas == ["Cafe"] and replay.residents == ["Ann Lee"]


def test_a_file_without_events_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ReplayError, match="no town events"):
        read_replay(write(tmp_path / "empty.jsonl", "", "{}"))
    with pytest.raises(ReplayError, match="cannot read"):
        read_replay(tmp_path / "missing.jsonl")


def test_a_towns_replay_is_simulates_else_the_demos(tmp_path: Path) -> None:
    assert town_replay(None, "mini") is None and town_replay(tmp_path, "mini") is None
    demo = write(tmp_path / "replay.jsonl", line("07:00", "woke", "Home"))
    assert town_replay(tmp_path, "mini") == demo
    (tmp_path / "replays").mkdir()
    simulated = write(tmp_path / "replays" / "mini.jsonl", line("07:00", "woke", "Home"))
    assert town_replay(tmp_path, "mini") == simulated


async def test_the_replay_page_serves_the_run_with_every_channel_on_the_map(tmp_path: Path) -> None:
    path = write(
        tmp_path / "run.jsonl",
        line("07:00", "woke", "Home", resident="Ann Lee", text="Ann Lee is waking up"),
        line("07:10", "woke", "Barn", resident="Bo Ray", text="Bo Ray is waking up"),
    )
    page = ReplayPage(
        read_replay(path), "Town", [MapPlace("Home", "a house", None)], {"Ann Lee": "🍞"}
    )
    await page.start()
    try:
        async with aiohttp.ClientSession() as http:
            town = await (await http.get(page.url.removesuffix("/replay") + "/api/town")).json()
            assert town == {
                "name": "Town",
                "areas": ["Home", "Barn"],
                "live": False,
                "replay": True,
            }
            data = await (await http.get(page.url.removesuffix("/replay") + "/api/replay")).json()
            assert [p["name"] for p in data["places"]] == ["Home", "Barn"]  # Barn: not in the file
            assert data["avatars"] == {"Ann Lee": "🍞"} and len(data["events"]) == 2
            assert (await http.get(page.url)).status == 200
    finally:
        await page.stop()

"""Replays rotate by game day and keep ``keep_days`` of them; readers see one run."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from adapters.web.replay import read_replay
from town.experiments.society.attendance import read_replay as read_events
from town.outbox.replays import ReplayWriter, replay_parts

DAY1 = datetime(2023, 2, 13, 7, 0, tzinfo=UTC)


def event(at: datetime) -> str:
    return json.dumps(
        {
            "at": at.isoformat(),
            "kind": "moved",
            "channel": "Hobbs Cafe",
            "resident": "Isabella",
            "to": "Hobbs Cafe",
            "text": "Isabella arrives",
        }
    )


def write_days(path: Path, days: int, keep_days: int, first: datetime = DAY1) -> None:
    with ReplayWriter(path, keep_days) as out:
        for n in range(days):
            for hour in (0, 10):
                at = first + timedelta(days=n, hours=hour)
                out.write(event(at), at)


def test_a_replay_is_a_file_a_game_day_and_keeps_its_retention(tmp_path: Path) -> None:
    path = tmp_path / "replays" / "smallville.jsonl"
    write_days(path, 5, keep_days=3)
    assert [p.name for p in replay_parts(path)] == [
        "smallville.2023-02-15.jsonl",
        "smallville.2023-02-16.jsonl",
        "smallville.jsonl",
    ]
    days = [json.loads(line)["at"][:10] for p in replay_parts(path) for line in p.open()]
    assert days == ["2023-02-15"] * 2 + ["2023-02-16"] * 2 + ["2023-02-17"] * 2


def test_a_resumed_run_rotates_the_day_its_file_holds(tmp_path: Path) -> None:
    path = tmp_path / "demo.jsonl"
    write_days(path, 1, keep_days=0)
    write_days(path, 2, keep_days=0, first=DAY1 + timedelta(days=1))  # started again
    assert [p.name for p in replay_parts(path)] == [
        "demo.2023-02-13.jsonl",
        "demo.2023-02-14.jsonl",
        "demo.jsonl",
    ]


def test_readers_read_every_day_in_order(tmp_path: Path) -> None:
    path = tmp_path / "smallville.jsonl"
    write_days(path, 3, keep_days=0)
    events, bad = read_events(path)
    assert bad == 0 and len(events) == 6
    assert [e["at"] for e in events] == sorted(e["at"] for e in events)
    assert len(read_replay(path).events) == 6

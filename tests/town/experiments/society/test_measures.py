"""The society measures' small pieces: density, verdicts, fact mentions, whereabouts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tests.factories import MINITOWN
from town.experiments.society.attendance import present_at, whereabouts
from town.experiments.society.interviews import parse_verdict
from town.experiments.society.measures import density, mentions_fact
from town.world.load import load_town

ISABELLA, KLAUS, MARIA = "Isabella Rodriguez", "Klaus Mueller", "Maria Lopez"


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2023, 2, day, hour, minute, tzinfo=UTC)


def replay() -> list[dict[str, Any]]:
    """Klaus arrives at the party at 17:30; Maria was at the cafe but left before it began."""
    return [
        {"at": at(14, 16), "kind": "action", "resident": MARIA, "location": "Hobbs Cafe: counter"},
        {
            "at": at(14, 16, 50),
            "kind": "moved",
            "resident": MARIA,
            "from": "Hobbs Cafe: counter",
            "to": "Mueller home: study",
            "direction": "in",
        },
        {
            "at": at(14, 17, 30),
            "kind": "moved",
            "resident": KLAUS,
            "from": "Mueller home: bedroom",
            "to": "Hobbs Cafe: counter",
            "direction": "in",
        },
        {"at": at(14, 17), "kind": "action", "resident": ISABELLA, "location": "Hobbs Cafe"},
    ]


def test_the_small_pieces() -> None:
    assert density(25, list(range(50))) == pytest.approx(50 * 2 / (25 * 24))
    assert density(1, []) == 0.0
    assert parse_verdict("Yes, she does") is True and parse_verdict(" no.") is False
    assert parse_verdict("it is hard to say") is None and parse_verdict("") is None
    party = load_town(MINITOWN).scenario.fact("valentines_party")
    assert mentions_fact("Isabella invited me to a party", party)
    assert not mentions_fact("Maria Lopez is a friend of Isabella Rodriguez", party)
    track = whereabouts(replay())[MARIA]
    assert track[0] == (at(14, 16), "Hobbs Cafe") and track[-1] == (at(14, 16, 50), "Mueller home")
    assert not present_at(track, "Hobbs Cafe", at(14, 17), at(14, 19))
    assert present_at(track, "Hobbs Cafe", at(14, 16, 30), at(14, 19))

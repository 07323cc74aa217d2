"""What a resident notices: arrivals and changed objects, kept small."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.factories import resident_row
from town.tick.perceive import perceive
from town.tick.state import ResidentState
from town.tick.turn import Tick
from town.world.load import load_town
from town.world.places import World


def test_a_resident_keeps_little_of_an_area_yet_notices_every_change() -> None:
    spec = load_town("smallville")
    kitchen, stove = "Hobbs Cafe: kitchen", ("Hobbs Cafe: kitchen", "stove")
    usual = {(place, obj.name): obj.state for place, obj in spec.objects()}
    isabella = resident_row("Isabella Rodriguez", location="Hobbs Cafe: counter")
    state = ResidentState()
    clock = iter(range(4))

    def look(**states: str) -> list[str]:
        world = World(spec, 1, {**usual, **{(kitchen, k): v for k, v in states.items()}})
        start = {
            "Isabella Rodriguez": ("Hobbs Cafe: counter", "serving", True),
            "Maria Lopez": ("Hobbs Cafe: seating area", "drinking coffee", True),
        }
        now = datetime(2023, 2, 13, 9, next(clock) * 10, tzinfo=UTC)
        tick = Tick(None, now, world, None, None, {}, {}, start)  # type: ignore[arg-type]
        return [o.text for o in perceive(tick, isabella, state)]

    assert look() == ["Maria Lopez is drinking coffee"]  # the usual objects are not news
    assert state.seen["Hobbs Cafe"] == {"@Maria Lopez": ""}
    assert look() == []  # nothing changed
    assert look(stove="burning") == ["the stove in the kitchen of Hobbs Cafe is burning"]
    assert state.seen["Hobbs Cafe"] == {
        "@Maria Lopez": "",
        "object|Hobbs Cafe: kitchen|stove": "the stove in the kitchen of Hobbs Cafe is burning",
    }
    assert look() == [f"the stove in the kitchen of Hobbs Cafe is {usual[stove]}"]  # put out
    assert state.seen["Hobbs Cafe"] == {"@Maria Lopez": ""}
    assert state.known == {"Hobbs Cafe": "2023-02-13T09:00:00+00:00"}

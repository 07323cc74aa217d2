"""What a resident notices at its area: arrivals, changed objects, inputs (section 4.3).

Synchronous, and read from the tick's starting snapshot, so residents thought about concurrently
all see the same world.
"""

from __future__ import annotations

from dataclasses import dataclass

from town.store.models import Resident
from town.tick.state import ResidentState
from town.tick.turn import Tick
from town.world.places import World


@dataclass(frozen=True)
class Observation:
    key: str  # "@Name" for a resident, "object|<sub-area>|<object>", "inbox" for inputs
    text: str


def perceive(tick: Tick, resident: Resident, state: ResidentState) -> list[Observation]:
    """What is new at the resident's area since it last looked: arrivals, changed objects, inputs.

    Other residents are noticed when they arrive (or when this resident arrives), objects when
    their state differs from what the resident last saw there (on a first visit: from their usual
    state), and inputs (a visitor's words, an inner voice) always. What it saw is kept small:
    who was there, and only the objects that were not in their usual state.
    """
    area = World.area_of(resident.location)
    before = state.seen.get(area)
    seen: dict[str, str] = {}
    found: list[Observation] = []
    for name, action, awake in tick.present(area):
        if name != resident.name:
            key = f"@{name}"
            seen[key] = ""
            if before is None or key not in before:
                found.append(Observation(key, f"{name} is {action if awake else 'asleep'}"))
    usual = tick.world.usual
    for place, obj, obj_state in tick.world.objects_in(area):
        key, text = f"object|{place}|{obj}", _object_text(place, obj, obj_state)
        usual_state = usual.get((place, obj))
        if obj_state != usual_state:
            seen[key] = text
        last = before.get(key) if before is not None else None
        if last is None and usual_state is not None:  # not remembered: as it usually is
            last = _object_text(place, obj, usual_state)
        if last != text:
            found.append(Observation(key, text))
    if seen != before:
        state.seen[area] = seen
    state.known.setdefault(area, tick.now.isoformat())
    found += [Observation("inbox", text) for text in state.inbox]
    state.inbox = []
    return found


def _object_text(place: str, obj: str, obj_state: str) -> str:
    return f"the {obj} in {_spoken_place(place)} is {obj_state}"


def _spoken_place(place: str) -> str:
    """ "Hobbs Cafe: kitchen" -> "the kitchen of Hobbs Cafe" """
    parts = place.split(": ")
    return f"the {parts[-1]} of {parts[0]}" if len(parts) > 1 else parts[0]

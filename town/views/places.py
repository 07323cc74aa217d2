"""Who is where, and a place as a visitor sees it: read, never waited for."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from town.inputs.unit import area_named
from town.tick.engine import Engine
from town.tick.state import ResidentState
from town.views.reading import reading
from town.world.places import World


@dataclass(frozen=True)
class Whereabouts:
    clock: datetime
    paused: bool
    minutes_per_tick: int
    by_area: dict[str, list[tuple[str, str, bool]]]  # area -> [(resident, action, awake)]


async def whereabouts(engine: Engine) -> Whereabouts:
    """Who is where and doing what, with the town's clock."""
    with reading(engine) as read:
        by_area: dict[str, list[tuple[str, str, bool]]] = {}
        for row in read.residents().values():
            awake = ResidentState.of(row).awake
            by_area.setdefault(World.area_of(row.location), []).append(
                (row.name, row.action, awake)
            )
        town = read.town
    return Whereabouts(town.clock, town.paused, town.minutes_per_tick, by_area)


async def look(engine: Engine, location: str) -> str:
    """A place as a visitor sees it now: what it is, if it is open, its objects, who is there."""
    with reading(engine) as read:
        world = World.load(read.session, engine.town_id, engine.spec)
        area = area_named(world, location)
        clock = read.town.clock
        spec = world.spec.area(area)
        lines = [f"{area}: {spec.description}" if spec.description else area]
        if spec.opens and spec.closes:
            state = "open" if world.is_open(area, clock) else "closed"
            lines.append(f"Open {spec.opens}-{spec.closes}; now ({clock:%H:%M}) it is {state}.")
        for place, name, obj_state in world.objects_in(area):
            lines.append(f"- {place.split(': ', 1)[-1]}: the {name} is {obj_state}")
        here = [
            (r.name, r.action, ResidentState.of(r).awake)
            for r in read.residents().values()
            if World.area_of(r.location) == area
        ]
    if not here:
        lines.append("Nobody is here.")
    for name, action, awake in here:
        lines.append(f"{name} is {action if awake else 'asleep'}.")
    return "\n".join(lines)

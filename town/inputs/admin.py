"""What an admin does to a town: a resident's inner voice, an object's state, the clock.

Each is written at once, in a short transaction of its own, and never makes a tick think again
(none raises the town's revision): what it writes is never what a tick writes over.

- ``whisper`` waits as a pending input (``PendingInput``) that the next tick to start takes in:
  the resident hears it then, as before, and a tick thinking meanwhile is left alone.
- ``set`` writes the object's row at once (``look`` shows it); residents there notice it at the
  next tick to start. Should a tick thinking meanwhile change the same object, its commit comes
  later and wins, as the later of two edits does.
- ``pause`` and ``speed`` write the town's own columns, which a tick leaves alone: a tick thinking
  meanwhile commits, and the next one is paused or moves at the new pace. A pause answers once
  the tick in flight in this process has committed (holding nothing meanwhile), so the time it
  gives is the time the clock stopped.
"""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

from town.inputs.unit import InputUnit, input_unit
from town.outbox import audit
from town.outbox.events import TownEvent, write_outbox
from town.store.models import PendingInput
from town.text import clean_text, name_of
from town.tick.engine import Engine
from town.tick.pending import WHISPER
from town.world.places import World

MAX_MINUTES_PER_TICK = 24 * 60  # a game day a tick at most

MIN_TICK_SECONDS, MAX_TICK_SECONDS = 0.05, 3600.0


async def whisper(
    engine: Engine, resident: str, text: str, *, by: str = "", platform: str = "", user_id: str = ""
) -> str:
    """The resident's inner voice: a directive it perceives and acts on at its next tick.
    ``by``, ``platform`` and ``user_id`` say who whispered, for the audit log."""
    words = clean_text(text)
    if not words:
        raise ValueError("whisper what? the text is empty")
    async with input_unit(engine, changes_town=False) as unit:
        row = unit.resident(resident)
        pending = PendingInput(town_id=engine.town_id, resident=row.name, kind=WHISPER, text=words)
        unit.session.add(pending)
        who = audit.identity(name_of(by), platform, user_id)
        area = World.area_of(row.location)
        said = f"{row.name}: {words}"
        unit.audit(audit.IN, "whisper", who, said, platform=platform, channel=area)
    return row.name


async def set_object(
    engine: Engine,
    path: str,
    new_state: str,
    *,
    by: str = "",
    platform: str = "",
    user_id: str = "",
) -> str:
    """Rewrite an object's state in words; residents there notice it at their next tick.
    ``by``, ``platform`` and ``user_id`` say who did it, for the audit log."""
    words = clean_text(new_state, 200)
    if not words:
        raise ValueError("set it to what? the state is empty")
    async with input_unit(engine, changes_town=False) as unit:
        world = World.load(unit.session, engine.town_id, engine.spec)
        place, name = world.find_object(path)
        world.set_state(unit.session, place, name, words)
        area = World.area_of(place)
        event = TownEvent(
            "object",
            area,
            unit.clock,
            "",
            f"the {name} in {place} is now {words}",
            {"object": f"{place}: {name}", "state": words},
        )
        write_outbox(unit.session, engine.town_id, f"set:{uuid4().hex}", [event])
        who = audit.identity(name_of(by), platform, user_id)
        done = f"{place}: {name} = {words}"
        unit.audit(audit.IN, "set", who, done, platform=platform, channel=area)
    return f"{place}: {name}"


async def set_paused(engine: Engine, paused: bool, *, announce_in: str = "") -> datetime:
    """Stop or start the town's clock (stored, so a restart keeps it); returns the game time.
    Resuming marks the wall time the clock runs again from, so a pause is never time missed.
    When the clock changes, one public line says so in the area ``announce_in`` (if given).

    A pause is written at once; a tick this process is thinking meanwhile still commits, and
    the pause answers once it has (holding nothing while it waits), so the time it gives is the
    time the clock stopped, and nothing new happens in the town after it answers."""
    async with input_unit(engine, changes_town=False) as unit:
        town = unit.town
        changed = town.paused != paused
        if town.paused and not paused:
            town.last_tick_at = datetime.now(UTC)
        town.paused = paused
        unit.session.add(town)
        if changed and not paused:
            _announce(unit, announce_in, f"The town's clock runs again at {town.clock:%A %H:%M}.")
    if not paused:
        return town.clock
    async with engine.ticking:  # (the tick in flight, if any, has committed)
        pass
    async with input_unit(engine, changes_town=False) as unit:
        if changed:
            _announce(unit, announce_in, f"The town's clock stops at {unit.clock:%A %H:%M}.")
        return unit.clock


async def set_speed(
    engine: Engine,
    minutes_per_tick: int,
    tick_seconds: float | None = None,
    *,
    announce_in: str = "",
) -> tuple[int, float | None]:
    """How much game time a tick is, and the real seconds between ticks (None: the deployment's
    default, ``settings.tick_seconds``). Stored on the town, so a restart keeps them. When the
    pace changes, one public line says so in the area ``announce_in`` (if given)."""
    if not 1 <= minutes_per_tick <= MAX_MINUTES_PER_TICK:
        raise ValueError(f"minutes per tick must be 1 to {MAX_MINUTES_PER_TICK}")
    if tick_seconds is not None and not MIN_TICK_SECONDS <= tick_seconds <= MAX_TICK_SECONDS:
        raise ValueError(
            f"seconds between ticks must be {MIN_TICK_SECONDS:g} to {MAX_TICK_SECONDS:g}"
        )
    async with input_unit(engine, changes_town=False) as unit:
        town = unit.town
        changed = (town.minutes_per_tick, town.tick_seconds) != (minutes_per_tick, tick_seconds)
        town.minutes_per_tick = minutes_per_tick
        town.tick_seconds = tick_seconds
        unit.session.add(town)
        if changed:
            each = "" if tick_seconds is None else f" every {tick_seconds:g} s"
            _announce(unit, announce_in, f"The town now moves {minutes_per_tick} min a tick{each}.")
    return minutes_per_tick, tick_seconds


def _announce(unit: InputUnit, area: str, text: str) -> None:
    """One public line of the town's narration in ``area``'s channel (none without an area)."""
    if area:
        event = TownEvent("notice", area, unit.clock, "", text, {})
        write_outbox(unit.session, unit.engine.town_id, f"town:{uuid4().hex}", [event])

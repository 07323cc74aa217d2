"""Changing a living town from its edited folder (``bottown town update``, ``/town reload``).

The folder is read and checked first (a broken folder changes nothing and lists every problem);
then a short read of where everyone is; then the new seed memories are rated by the brain with
nothing held; then one short unit of work (an input, like an admin command) applies everything
and raises the town's ``persona_revision``, so that a running town in another process loads the
folder again (:func:`follow_persona`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from uuid import uuid4

from sqlmodel import Session, col, select

from town.authoring.changes import Changes, plan_changes
from town.inputs.unit import InputUnit, input_unit
from town.memory.stream import NewMemory
from town.outbox import audit
from town.outbox.events import TownEvent, write_outbox
from town.store.models import Location, Resident, Town
from town.text import name_of
from town.tick.engine import Engine, TownChanged
from town.tick.seed import add_objects, add_places, rate_seeds, seeds_of, settle
from town.tick.state import ResidentState
from town.world.load import load_town
from town.world.persona import MOVED_AWAY, ResidentSpec, TownSpec
from town.world.places import World


class UpdateRefused(ValueError):
    """The folder is valid, but a change cannot be applied to the living town."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__("nothing was changed: " + "; ".join(reasons))


@dataclass
class _Rows:
    where: dict[str, str]  # resident -> location, for those who live in the town
    away: set[str]  # who moved away before
    places: set[str]  # every place path in the store


def _rows(session: Session, engine: Engine) -> _Rows:
    rows = session.exec(select(Resident).where(Resident.town_id == engine.town_id)).all()
    places = session.exec(select(Location.path).where(Location.town_id == engine.town_id)).all()
    return _Rows(
        {r.name: r.location for r in rows if r.location != MOVED_AWAY},
        {r.name for r in rows if r.location == MOVED_AWAY},
        set(places),
    )


def persona_source(folder: str | Path) -> str:
    """How the store records a folder: a path as an absolute path, a shipped town by name."""
    text = str(folder)
    if isinstance(folder, Path) or "/" in text or "\\" in text or text.startswith("."):
        return str(Path(folder).resolve())
    return text


async def apply_update(
    engine: Engine, folder: str | Path, *, by: str = "", platform: str = ""
) -> Changes:
    """Apply the town in ``folder`` to the living town; returns what changed. Raises
    ``PersonaError`` (every problem) or :class:`UpdateRefused`, having changed nothing."""
    spec = load_town(folder)
    with Session(engine.store.engine) as session:  # a short read
        before = _rows(session, engine)
    changes = plan_changes(engine.spec, spec, before.where, before.away, before.places)
    if changes.refused:
        raise UpdateRefused(changes.refused)
    arriving = [*changes.moving_in, *changes.moving_back]
    seeds = [(p, seeds_of(p, spec)) for p in changes.moving_in]
    asked = [(p.name, [t for t, _ in s]) for p, s in seeds]
    asked += [(name, [t for t, _ in s]) for name, s in changes.new_memories.items()]
    rated = await rate_seeds(engine.brain, asked)  # nothing is held while the brain thinks
    old = engine.spec
    try:
        async with input_unit(engine) as unit:
            now = _rows(unit.session, engine)
            again = plan_changes(old, spec, now.where, now.away, now.places)
            if again.refused:
                raise UpdateRefused(again.refused)
            if again.lines() != changes.lines():  # another update meanwhile: start again
                raise TownChanged(engine.town_id)
            add_places(unit.session, engine.town_id, spec.areas, only=set(changes.new_places))
            add_objects(unit.session, engine.town_id, changes.new_objects)
            await settle(
                unit.session, engine.town_id, unit.clock, seeds, rated[: len(seeds)], engine.streams
            )
            await _remember(unit, changes, rated[len(seeds) :])
            _move_back(unit, changes.moving_back)
            left = _move_away(unit, changes.moving_away)
            _persona_rows(unit, spec, changes.persona_changed)
            unit.town.scenario = persona_source(folder)
            unit.town.applied_persona = spec.model_dump(mode="json")
            unit.town.persona_revision += 1
            unit.session.add(unit.town)
            _announce(unit, arriving, changes, left)
            who = audit.identity(name_of(by), platform, "")
            said = "; ".join(changes.lines()) or "no changes"
            unit.audit(audit.IN, "update", who, said, platform=platform, channel="")
            engine.spec = spec  # under the engine's lock: the next tick sees the new town
    except BaseException:
        engine.spec = old
        raise
    return changes


async def reload(engine: Engine, *, by: str = "", platform: str = "") -> Changes:
    """``apply_update`` from the town's own folder, as recorded in the store (``/town
    reload``: an admin in chat never names a path on this machine)."""
    with Session(engine.store.engine) as session:
        folder = engine.town(session).scenario
    if not folder:
        raise ValueError("this town records no folder: apply one with `bottown town update`")
    return await apply_update(engine, folder, by=by, platform=platform)


def town_spec(town: Town) -> TownSpec:
    """The town as its last live update applied it, else as its folder says: a folder edited
    since is applied by ``town update`` or ``reload``, never by a restart."""
    if town.applied_persona:
        return TownSpec.model_validate_json(json.dumps(town.applied_persona))
    return load_town(town.scenario or town.name)


def follow_persona(engine: Engine, seen: int) -> int:
    """The town's persona revision; when another process raised it since ``seen`` (a shell's
    ``bottown town update``), the engine takes the town that update applied first."""
    if (revision := _persona_revision(engine)) != seen:
        with Session(engine.store.engine) as session:
            engine.spec = town_spec(engine.town(session))
    return revision


def _persona_revision(engine: Engine) -> int:
    with Session(engine.store.engine) as session:
        return engine.town(session).persona_revision


async def _remember(unit: InputUnit, changes: Changes, rated: list[list[int]]) -> None:
    rows = unit.engine.residents(unit.session)
    for (name, phrases), scores in zip(changes.new_memories.items(), rated, strict=True):
        row = rows[name]
        assert row.id is not None
        memories = [
            NewMemory("seed", text, score, private=private)
            for (text, private), score in zip(phrases, scores, strict=True)
        ]
        await unit.engine.streams(row.id).record(unit.session, memories, unit.clock)


def _move_back(unit: InputUnit, people: list[ResidentSpec]) -> None:
    names = [p.name for p in people]
    rows = unit.session.exec(
        select(Resident).where(
            Resident.town_id == unit.engine.town_id, col(Resident.name).in_(names)
        )
    ).all()
    by_name = {p.name: p for p in people}
    for row in rows:
        person = by_name[row.name]
        state = ResidentState.of(row)
        state.awake, state.talk, state.item, state.day = False, None, None, ""
        for place in person.known_places:
            state.known.setdefault(place, unit.clock.isoformat())
        state.save(row)
        row.location, row.action, row.emoji = person.home, "sleeping", "😴"
        row.persona = person.model_dump(mode="json")
        unit.session.add(row)


def _move_away(unit: InputUnit, names: list[str]) -> dict[str, str]:
    """Who leaves, and the area each was in."""
    rows = unit.engine.residents(unit.session)
    leaving = {rows[n].id: rows[n] for n in names if n in rows}
    talks = {ResidentState.of(r).talk for r in leaving.values()} - {None}
    for row in rows.values():
        state = ResidentState.of(row)
        if row.id in leaving or (state.talk is not None and state.talk in talks):
            state.talk = None  # a talk with someone who left ends
            if row.id in leaving:
                state.awake = False
            state.save(row)
            unit.session.add(row)
    left = {}
    for row in leaving.values():
        left[row.name] = World.area_of(row.location)
        row.location, row.action, row.emoji = MOVED_AWAY, "moved away", "🧳"
    return left


def _persona_rows(unit: InputUnit, spec: TownSpec, names: list[str]) -> None:
    rows = unit.engine.residents(unit.session)
    for name in names:
        if name in rows:
            rows[name].persona = spec.resident(name).model_dump(mode="json")
            unit.session.add(rows[name])


def _announce(
    unit: InputUnit, arriving: list[ResidentSpec], changes: Changes, left: dict[str, str]
) -> None:
    """The channels hear it: a new place opens, a newcomer says hello where it lives, and
    the town says who moved away, where they were."""
    events: list[TownEvent] = []
    for path in changes.new_places:
        if ": " not in path:
            events.append(TownEvent("notice", path, unit.clock, "", f"🏗️ {path} opens.", {}))
    for person in arriving:
        area = World.area_of(person.home)
        events.append(
            TownEvent(
                "notice",
                area,
                unit.clock,
                "",
                f"🧳 {person.name} moves in to {person.home}.",
                {},
            )
        )
        hello = f"Hello! I'm {person.first_name}, {person.occupation}; I've just moved in."
        events.append(
            TownEvent("said", area, unit.clock, person.name, hello, {"emoji": person.avatar_emoji})
        )
    for name, area in left.items():
        events.append(TownEvent("notice", area, unit.clock, "", f"🧳 {name} has moved away.", {}))
    if events:
        write_outbox(unit.session, unit.engine.town_id, f"update:{uuid4().hex}", events)

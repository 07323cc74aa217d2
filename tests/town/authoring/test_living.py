"""A living town follows its edited folder: newcomers move in with seed memories and plan at
their next wake-up, new places open, those left out move away with their memories kept; what
cannot be applied live is refused, and a broken folder changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlmodel import func, select

from tests.factories import CAFE_PAIR, at_cafe, memories, resident, ticks, until
from tests.town.authoring.edits import FINN, QUAY, folder_with, without
from town.authoring.living import UpdateRefused, apply_update, follow_persona
from town.store.db import Store
from town.store.models import AuditEntry, Location, OutboxEvent, Town, WorldObject
from town.tick.engine import Engine
from town.tick.state import ResidentState
from town.world.persona import MOVED_AWAY, PersonaError


def count(store: Store, table: type, **where: object) -> int:
    with store.session() as s:
        query = select(func.count()).select_from(table)
        for key, value in where.items():
            query = query.where(getattr(table, key) == value)
        return int(s.exec(query).one())


async def test_a_newcomer_and_a_place_join_and_one_moves_away_losing_nothing(
    engine: Engine, store: Store, tmp_path: Path
) -> None:
    await ticks(engine, 8)  # the town has some history
    klaus_memories = len(memories(store, "Klaus Mueller"))
    folder = folder_with(tmp_path, town=QUAY, residents=FINN)
    (folder / "residents.toml").write_text(
        (folder / "residents.toml")
        .read_text("utf-8")
        .replace(
            "Maria Lopez studies physics;",
            "Maria Lopez studies physics; Maria Lopez has a new bike;",
        ),
        "utf-8",
    )
    changes = await apply_update(engine, folder, by="tester", platform="cli")
    assert [r.name for r in changes.moving_in] == ["Finn Reed"]
    assert changes.new_places == [
        "Harbour Quay",
        "Harbour Quay: pier",
        "Harbour Quay: Finn's cabin",
    ]
    assert "Finn Reed" in engine.specs() and engine.spec.area("Harbour Quay")
    assert count(store, Location, path="Harbour Quay: pier") == 1
    assert count(store, WorldObject, name="hammock") == 1
    seeds = [m.text for m in memories(store, "Finn Reed") if m.kind == "seed"]
    assert "Finn Reed has just come to town" in seeds
    assert "Maria Lopez has a new bike" in [m.text for m in memories(store, "Maria Lopez")]
    with store.session() as s:
        hello = s.exec(select(OutboxEvent).where(OutboxEvent.channel == "Harbour Quay")).all()
    assert {(e.kind, e.payload["resident"]) for e in hello} >= {("said", "Finn Reed")}

    await until(engine, lambda: ResidentState.of(resident(store, "Finn Reed")).awake)
    await ticks(engine, 3)  # he plans his day from the wake-up, and lives it
    assert resident(store, "Finn Reed").action not in ("sleeping", "waking up")

    outbox, audits = count(store, OutboxEvent), count(store, AuditEntry)
    without(folder, "Klaus Mueller")
    changes = await apply_update(engine, folder)
    assert changes.moving_away == ["Klaus Mueller"]
    klaus = resident(store, "Klaus Mueller")
    assert klaus.location == MOVED_AWAY
    with store.session() as s:
        assert "Klaus Mueller" not in engine.residents(s)
    assert len(memories(store, "Klaus Mueller")) >= klaus_memories  # nothing forgotten
    await ticks(engine, 3)
    assert resident(store, "Klaus Mueller").location == MOVED_AWAY  # not ticked any more
    assert count(store, OutboxEvent) > outbox and count(store, AuditEntry) > audits

    back = folder_with(tmp_path, town=QUAY, residents=FINN)  # Klaus comes back
    changes = await apply_update(engine, back)
    assert [r.name for r in changes.moving_back] == ["Klaus Mueller"]
    assert resident(store, "Klaus Mueller").location == "Mueller home: bedroom"
    assert len(memories(store, "Klaus Mueller")) >= klaus_memories


async def test_renaming_a_place_with_people_in_it_is_refused_and_changes_nothing(
    engine: Engine, store: Store, tmp_path: Path
) -> None:
    await until(engine, at_cafe(store, *CAFE_PAIR))
    folder = folder_with(tmp_path)
    for name in ("town.toml", "residents.toml", "scenario.toml"):
        path = folder / name
        path.write_text(path.read_text("utf-8").replace("Hobbs Cafe", "Hobbs Coffee"), "utf-8")
    spec, places = engine.spec, count(store, Location)
    with pytest.raises(UpdateRefused) as refused:
        await apply_update(engine, folder)
    assert "'Hobbs Cafe' is gone from town.toml (renamed or removed) while" in str(refused.value)
    assert "Isabella Rodriguez" in str(refused.value)
    assert engine.spec is spec and count(store, Location) == places
    with store.session() as s:
        assert engine.town(s).persona_revision == 0


async def test_a_broken_folder_lists_every_problem_and_changes_nothing(
    engine: Engine, store: Store, tmp_path: Path
) -> None:
    folder = folder_with(tmp_path, residents=FINN.replace("Harbour Quay: Finn's cabin", "Nowhere"))
    places, people = count(store, Location), len(engine.specs())
    with pytest.raises(PersonaError) as broken:
        await apply_update(engine, folder)
    assert any("residents[3].home: 'Nowhere' is not a place" in p for p in broken.value.problems)
    assert any("residents[3].workplace:" in p for p in broken.value.problems)
    assert count(store, Location) == places and len(engine.specs()) == people


async def test_a_running_town_follows_an_update_made_elsewhere(
    engine: Engine, store: Store, tmp_path: Path
) -> None:
    elsewhere = Engine(store, engine.spec, engine.brain, engine.streams, engine.town_id)
    seen = follow_persona(engine, 0)
    await apply_update(elsewhere, folder_with(tmp_path, town=QUAY, residents=FINN))
    assert "Finn Reed" not in engine.specs()
    seen = follow_persona(engine, seen)
    assert seen == 1 and "Finn Reed" in engine.specs()
    with store.session() as s:
        assert s.get(Town, engine.town_id).scenario == str((tmp_path / "mini-edited").resolve())


async def test_a_folder_edited_before_the_first_update_still_brings_everyone_in(
    engine: Engine, store: Store, tmp_path: Path
) -> None:
    """A town founded before it stored the town it applied opens on its folder as it is now,
    edits included: who lives there and which places exist are read from the store."""
    from town.world.load import load_town

    folder = folder_with(tmp_path, town=QUAY, residents=FINN)
    engine.spec = load_town(folder)  # opened from the edited folder
    changes = await apply_update(engine, folder)
    assert [r.name for r in changes.moving_in] == ["Finn Reed"]
    assert "Harbour Quay" in changes.new_places
    assert count(store, Location, path="Harbour Quay") == 1

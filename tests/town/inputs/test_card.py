"""The map's and a resident's card's view of the store: nothing private, nobody unknown."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.factories import make_engine, resident, ticks
from town.inputs.unit import UnknownResident
from town.store.db import Store
from town.store.models import Memory
from town.views.card import resident_card, town_map


async def test_a_card_leaves_out_private_memories(store: Store) -> None:
    engine = await make_engine(store)
    await ticks(engine, 6)
    row = resident(store, "Klaus Mueller")
    with store.session() as s:
        later = engine.town(s).clock + timedelta(minutes=1)
        for kind, text, private in (
            ("reflection", "Klaus thinks his research matters", False),
            ("reflection", "Klaus hides his doubts", True),
            ("observation", "a visitor's phone number", True),
        ):
            s.add(Memory(resident_id=row.id, kind=kind, text=text, created=later,
                         last_access=later, importance=6, private=private))  # fmt: skip
        s.commit()
    card = await resident_card(engine, "klaus")
    assert card.who.name == "Klaus Mueller" and card.who.avatar
    assert [m.text for m in card.reflections] == ["Klaus thinks his research matters"]
    shown = [m.text for m in (*card.memories, *card.reflections)] + [
        h for p in card.people for h in p.how
    ]
    assert not any("doubts" in t or "phone" in t for t in shown)
    assert all(m.kind not in ("reflection", "seed") for m in card.memories)
    with pytest.raises(UnknownResident):
        await resident_card(engine, "Nobody")


async def test_the_map_has_every_area_and_resident(store: Store) -> None:
    engine = await make_engine(store)
    seen = await town_map(engine)
    assert [p.name for p in seen.places] == [a.name for a in engine.spec.areas]
    assert sorted(r.name for r in seen.residents) == sorted(r.name for r in engine.spec.residents)
    assert all(not r.awake and r.action == "asleep" for r in seen.residents)  # 06:50


def test_a_card_says_who_now_next_and_today_once_and_the_party() -> None:
    from datetime import UTC, datetime

    from town.views.card import PlanLine, Present, about
    from town.world.load import load_town

    town = load_town("smallville")
    at = datetime(2023, 2, 14, 13, 0, tzinfo=UTC)
    plan = [
        PlanLine(at.replace(hour=h), 60, what, "Hobbs Cafe: counter")
        for h, what in (
            (12, "serving lunch"),
            (14, "decorating the cafe"),
            (15, "serving coffee"),
            (16, "decorating the cafe"),
        )
    ]
    who = Present("Isabella Rodriguez", "", "Hobbs Cafe", "serving lunch", "", True)
    text = about(who, "cafe owner", plan, at, town)
    assert text == (
        "Isabella Rodriguez, cafe owner. Now serving lunch at Hobbs Cafe. "
        "Next, at 14:00: decorating the cafe. Later today: serving coffee. "
        "Isabella hosts the Valentine's Day party at Hobbs Cafe, 17:00."
    )


async def test_the_card_plans_the_whole_day_once_with_the_party(store: Store) -> None:
    """Isabella's Valentine's Day as the offline brain plans it, seen at 09:00 with the
    morning's hours already cut finer ("opening Hobbs Cafe" three times): the card's plan is
    the day's chunks, each thing once, the party on it, and "next" names what comes after now."""
    from datetime import UTC, datetime

    from sqlmodel import select

    from town.llm import schemas as sc
    from town.llm.offline.day import decompose, plan_day
    from town.llm.offline.hearing import Hearing
    from town.store.models import PlanItem, Resident
    from town.tick.state import ResidentState
    from town.world.gametime import at_clock
    from town.world.load import load_town

    isabella = load_town("smallville").resident("Isabella Rodriguez")
    fact = load_town("smallville").scenario.facts[0].phrase
    day = datetime(2023, 2, 14, tzinfo=UTC).date()
    planned = plan_day(
        sc.PlanDayInput(
            resident=isabella.name,
            summary=isabella.paragraph,
            yesterday=fact,
            date="Tuesday February 14, 2023",
            wake_time="06:00",
            routine=list(isabella.routine),
            places=[isabella.home, isabella.workplace],
        ),
        Hearing(),
    ).chunks
    opening = next(c for c in planned if c.description.startswith("opening"))
    hours = decompose(
        sc.DecomposeInput(
            resident=isabella.name, summary="", chunk=opening, granularity="hour", places=[]
        ),
        Hearing(),
    ).items
    engine = await make_engine(store)
    with store.session() as s:
        row = s.exec(select(Resident).where(Resident.name == isabella.name)).one()
        state = ResidentState.of(row)
        state.awake, state.day = True, day.isoformat()
        state.save(row)
        row.action = "turning on the lights"
        engine.town(s).clock = at_clock(day, "09:00")
        for level, items in (("day", planned), ("hour", hours)):
            for item in items:
                s.add(PlanItem(resident_id=row.id, day=day, level=level,
                               start=at_clock(day, item.start), duration_min=item.duration_min,
                               location=item.location, description=item.description))  # fmt: skip
        s.add(row)
        s.commit()
    assert len(hours) == 3 and all("opening Hobbs Cafe" in h.description for h in hours)
    card = await resident_card(engine, "Isabella")
    said = [line.description for line in card.plan]
    assert said == [c.description.removeprefix("still ") for c in planned]
    assert len(set(said)) == len(said)
    assert "hosting the Valentine's Day party" in said
    assert card.about.startswith("Isabella Rodriguez, owner of Hobbs Cafe. Now turning on")
    assert "Next, at 11:00: serving coffee and pastries to customers." in card.about
    assert "hosting the Valentine's Day party" in card.about

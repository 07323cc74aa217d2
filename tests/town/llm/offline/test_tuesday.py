"""The demo's Tuesday at Hobbs Cafe read as a scene (issue 40, item 4 and "Done when"): narration
that says what changed, at the place it is posted in, meals at meal times, the party's news told
before it, and at the party the guests talking of it, the host welcoming them and toasting.

It reads the shared two-day run's replay (conftest.py), and for digests, what that run's outbox
gives a platform that catches up with the whole backlog at once."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from adapters.core.delivery import OutboxPump
from tests.fakes.platform import FakePlatform, Sleeps
from town.llm import schemas as s
from town.llm.offline.meals import MEAL_HOURS, fitting, meal_in
from town.llm.offline.steps import action_steps
from town.llm.port import OfflineBrain
from town.llm.tasks import DECOMPOSE
from town.store.db import Store
from town.store.models import Town
from town.world.daytime import fitted
from town.world.persona import TownSpec

HOBBS = "Hobbs Cafe"
TUESDAY = datetime(2023, 2, 14, tzinfo=UTC).date()
PARTY = (datetime(2023, 2, 14, 17, tzinfo=UTC), datetime(2023, 2, 14, 19, tzinfo=UTC))
NEWS = re.compile(r"\b(?:have you heard|did you hear|guess what|by the way)\b", re.IGNORECASE)
Events = list[dict[str, Any]]


def tuesday_at_hobbs(run: Events) -> Events:
    return [e for e in run if e["at"].date() == TUESDAY and e["channel"] == HOBBS]


def test_no_action_names_a_place_other_than_where_the_resident_is(
    run: Events, town: TownSpec
) -> None:
    areas = [a.name for a in town.areas]
    elsewhere = [
        (e["at"], e["text"])
        for e in run
        if e["kind"] == "action"
        and any(a in e["text"] and a != e["channel"] for a in areas)
        and not e["text"].endswith(" left for " + e["channel"])
    ]
    assert elsewhere == []


def test_no_action_names_a_part_of_the_day_other_than_the_one_it_is_shown_in(
    run: Events,
) -> None:
    """No "writing jokes in the afternoon" at 17:40, nor "in the evening" at 16:20."""
    actions = [e for e in run if e["kind"] == "action"]
    assert any(" in the afternoon" in e["text"] for e in actions)  # (the routines say so)
    assert [(e["at"], e["text"]) for e in actions if fitted(e["text"], e["at"]) != e["text"]] == []


def test_no_meal_outside_meal_hours(run: Events) -> None:
    def in_hours(event: dict[str, Any]) -> bool:
        low, high = MEAL_HOURS[meal_in(event["text"]) or "lunch"]
        minute = event["at"].hour * 60 + event["at"].minute
        return low <= minute < high

    meals = [e for e in run if e["kind"] == "action" and meal_in(e["text"])]
    assert meals, "residents eat"
    assert [(e["at"], e["text"]) for e in meals if not in_hours(e)] == []


def test_narration_says_what_changed_never_still_nor_break_after_break(run: Events) -> None:
    actions = [e for e in run if e["kind"] == "action"]
    assert [e["text"] for e in actions if " is still " in e["text"]] == []
    last: dict[str, str] = {}
    repeated = []
    for event in actions:
        if "short break" in event["text"] and "short break" in last.get(event["resident"], ""):
            repeated.append((event["at"], event["text"]))
        last[event["resident"]] = event["text"]
    assert repeated == []
    breaks: dict[str, int] = {}
    for event in tuesday_at_hobbs(run):
        if event["kind"] == "action" and "short break" in event["text"]:
            breaks[event["resident"]] = breaks.get(event["resident"], 0) + 1
    assert all(n <= 2 for n in breaks.values()), breaks  # one an activity, not one an hour


def test_at_the_party_the_guests_talk_of_it_and_nobody_tells_it_as_news(
    run: Events, town: TownSpec
) -> None:
    host = next(e.host for e in town.scenario.events if e.id == "valentines_party")
    speech = [
        e for e in tuesday_at_hobbs(run) if e["kind"] == "said" and PARTY[0] <= e["at"] < PARTY[1]
    ]
    about = [e["text"] for e in speech if e["resident"] != host and "party" in e["text"].lower()]
    assert len(about) >= 10, about
    told_as_news = [e["text"] for e in speech if tells_party_news(e["text"])]
    assert told_as_news == []
    before = [e for e in run if e["kind"] == "said" and e["at"] < PARTY[0]]
    assert any(tells_party_news(e["text"]) for e in before)


def tells_party_news(line: str) -> bool:
    """Does a sentence of the line tell the party as news ("Have you heard? ... a party")?"""
    news = [p for p in re.split(r"(?<=[.!?])\s+", line) if NEWS.search(p)]
    return any("party" in p.lower() for p in news) or bool(
        re.search(r"(?:heard|news)\?\s+[^.?!]*\bparty\b", line, re.IGNORECASE)
    )


def test_the_host_welcomes_the_guests_and_raises_a_toast(run: Events, town: TownSpec) -> None:
    host = next(e.host for e in town.scenario.events if e.id == "valentines_party")
    hers = " ".join(
        e["text"]
        for e in tuesday_at_hobbs(run)
        if e["resident"] == host and PARTY[0] <= e["at"] < PARTY[1]
    )
    assert "welcom" in hers.lower() and "toast" in hers.lower()


async def test_a_platform_catching_up_after_the_fact_shows_the_past_as_scenes(
    run: Events, story_dir: Path
) -> None:
    """A platform that catches up with the whole backlog at once: what is more than a tick of
    the clock behind folds into scene lines, speech too (each line a resident said is in one,
    none lost, none posted alone hours late); only the present goes out on its own."""
    store = Store.open(f"sqlite:///{story_dir / 'bottown.db'}")
    try:
        with store.session() as session:
            town = session.exec(select(Town)).one()
        platform = FakePlatform()
        pump = OutboxPump(store, town.id or 0, platform, digest_after=8, sleep=Sleeps())
        while await pump.deliver_pending():
            pass
    finally:
        store.dispose()
    spoken = {e["text"] for e in tuesday_at_hobbs(run) if e["kind"] == "said"}
    at_hobbs = [m for m in platform.sent if m.area == HOBBS]
    scenes = " ".join(m.text for m in at_hobbs if m.author == "")
    assert spoken and [t for t in spoken if t not in scenes] == []
    assert all(m.author == "" for m in at_hobbs)  # nothing of the present left at the cafe
    assert any("talked here: “" in m.text.splitlines()[0] for m in at_hobbs)


# -- the rules, one by one -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("description", "start", "fitted"),
    [
        ("having lunch at Hobbs Cafe", 12 * 60, "having lunch at Hobbs Cafe"),
        ("having lunch at Hobbs Cafe", 16 * 60, "having a snack at Hobbs Cafe"),
        ("making a big breakfast", 13 * 60, "making a big lunch"),
        ("eating dinner with Jennifer", 23 * 60, "eating a snack with Jennifer"),
    ],
)
def test_a_meal_is_the_meal_of_its_hour(description: str, start: int, fitted: str) -> None:
    assert fitting(description, start) == fitted


def test_an_action_never_says_still_nor_names_the_place_it_is_posted_in() -> None:
    chunk = s.PlanItem(
        start="15:00",
        duration_min=60,
        location="Hobbs Cafe: counter",
        description="still writing jokes at Hobbs Cafe in the afternoon",
    )
    for granularity in ("action", "hour"):
        inputs = s.DecomposeInput(
            resident="Francisco Lopez", summary="", chunk=chunk, granularity=granularity
        )
        items = OfflineBrain().answer(DECOMPOSE, inputs).items
        if granularity == "action":
            assert [i.description for i in items] == ["writing jokes in the afternoon"]


def test_a_long_lunch_is_lunch_for_an_hour_then_company() -> None:
    chunk = s.PlanItem(
        start="13:00", duration_min=180, location="Hobbs Cafe: counter", description="having lunch"
    )
    inputs = s.DecomposeInput(resident="Sam Moore", summary="", chunk=chunk, granularity="hour")
    hours = [i.description for i in OfflineBrain().answer(DECOMPOSE, inputs).items]
    assert hours[0] == "having lunch" and all("lunch" not in h for h in hours[1:])


def test_a_host_welcomes_and_toasts_once_and_a_guest_enjoys_the_party() -> None:
    first = action_steps("hosting the Valentine's Day party, for a while", 5)
    later = action_steps("hosting the Valentine's Day party, then wrapping up", 5)
    assert first[0].startswith("welcoming") and any("toast" in a for a in first)
    assert not any("toast" in a for a in later) and later[-1] == "thanking everyone for coming"
    guest = action_steps("going to the Valentine's Day party, for a while", 4)
    assert "enjoying the Valentine's Day party" in guest
    assert not any(a.startswith("going to") for a in guest)

"""Waking up at a server's pace: against a server that answers a few calls a tick, a tick wakes
only as many residents as it can think for; the others sleep on and wake at the next ticks."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.factories import CAFE_PAIR, make_engine, resident
from tests.fakes.brain import ScriptedBrain
from town.llm.chain import Handles
from town.llm.pacing import Pacer
from town.store.db import Store
from town.store.models import Town
from town.tick.mind import WAKE_GRACE
from town.tick.state import ResidentState


def paced(pace_s: float | None, latency_s: float | None) -> Handles:
    """The handles of a brain that keeps a tick's pace against a one-slot server whose calls
    take ``latency_s`` (None: nothing measured yet)."""
    pacer = Pacer(1, 60)
    if latency_s is not None:
        pacer.answered(latency_s)
    return Handles(pacer=pacer, pace_s=pace_s)


def awake(store: Store) -> list[str]:
    return [n for n in CAFE_PAIR if ResidentState.of(resident(store, n)).awake]


async def test_a_slow_server_wakes_one_resident_a_tick_and_the_other_at_the_next(
    store: Store,
) -> None:
    brain, handles = ScriptedBrain(), paced(pace_s=10.0, latency_s=5.0)  # two calls a tick
    assert handles.begun_per_tick() == 1  # one wake-up
    engine = await make_engine(store, brain)
    engine.llm = handles
    await engine.tick()  # 07:10: both are due up since 07:00
    assert awake(store) == [CAFE_PAIR[0]]
    assert len(brain.calls("summarize")) == 1
    await engine.tick()
    assert awake(store) == list(CAFE_PAIR)
    assert len(brain.calls("summarize")) == 2 and len(brain.calls("plan_day")) == 1


async def test_a_quick_server_or_waiting_for_the_model_wakes_everyone_due(store: Store) -> None:
    assert paced(pace_s=10.0, latency_s=0.5).begun_per_tick() == 6  # 30% of 20 calls
    assert paced(pace_s=None, latency_s=5.0).begun_per_tick() is None  # ticks stretch
    assert Handles().begun_per_tick() is None  # the offline brain keeps any pace
    assert paced(pace_s=10.0, latency_s=None).begun_per_tick() == 1  # one, which measures
    engine = await make_engine(store, ScriptedBrain())
    engine.llm = paced(pace_s=None, latency_s=5.0)
    await engine.tick()
    assert awake(store) == list(CAFE_PAIR)


@pytest.mark.parametrize("pace_s", [10.0, None])
async def test_reflections_begin_at_the_same_pace_after_the_wake_ups(
    store: Store, pace_s: float | None
) -> None:
    brain = ScriptedBrain()  # one long thought a tick, or any number
    engine = await make_engine(store, brain)
    engine.llm = paced(pace_s=pace_s, latency_s=5.0)
    while awake(store) != list(CAFE_PAIR):
        await engine.tick()
    engine.reflect_threshold = 0  # both would reflect at once
    asked = []
    for _ in range(2):
        before = len(brain.calls("reflect_questions"))
        await engine.tick()
        asked.append(sorted(c.resident or "" for c in brain.calls("reflect_questions")[before:]))
    if pace_s is None:
        assert asked[0] == list(CAFE_PAIR)  # waiting for the model: both at once
    else:
        assert asked == [[CAFE_PAIR[0]], [CAFE_PAIR[1]]]  # one a tick, the other at the next


async def test_sleepers_past_their_wake_time_by_the_grace_wake_whatever_the_allowance(
    store: Store,
) -> None:
    """After a clock jump (a town back after hours down) everyone is due at once; a one-slot
    server's allowance of one wake-up a tick would leave the last asleep for as many ticks as
    there are residents, so those well past their time wake now (their calls wait no longer
    than the tasks' pace shares allow: the offline brain makes what the server cannot)."""
    brain = ScriptedBrain()
    engine = await make_engine(store, brain)
    engine.llm = paced(pace_s=10.0, latency_s=5.0)  # one wake-up a tick
    with store.session() as session:
        town = session.get(Town, engine.town_id)
        assert town is not None
        town.clock += WAKE_GRACE + timedelta(minutes=10)  # 08:20 at the next tick
        session.add(town)
        session.commit()
    await engine.tick()
    assert awake(store) == list(CAFE_PAIR)
    assert len(brain.calls("summarize")) == 2

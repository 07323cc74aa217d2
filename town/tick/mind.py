"""One resident's turn in a tick (section 4.3): wake or sleep, react to what is new, or follow
the plan. LLM calls are spent only where something is new: a resident with nothing new follows
its plan, and a plan chunk is decomposed only when it is due.

Waking up costs two calls (the summary description, then the day plan at the next tick), and
many residents wake at nearly the same hour; so does a reflection (questions, then insights),
and several residents pass the threshold together. Against a server that answers a few calls a
tick (a one-slot local one), a tick begins only as many of these as it can think for
(:meth:`town.llm.chain.Handles.begun_per_tick`; wake-ups first, in the residents' order): the
others sleep on, or reflect, a tick or more later, so the town's clock keeps its pace. A sleeper
past its wake time by more than ``WAKE_GRACE`` (a town many are due in at once, after a clock
jump) wakes whatever the allowance: its summary and plan wait for the server no longer than the
tasks' pace shares allow, and the offline brain makes what the server cannot (reason ``pace``),
so nobody sleeps through the day a member sees.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import datetime, timedelta
from typing import Any

from town.llm.schemas import SummarizeInput
from town.llm.tasks import SUMMARIZE
from town.memory.stream import MemoryStream
from town.outbox.events import TownEvent
from town.store.models import Resident
from town.tick.perceive import Observation
from town.tick.planning import current_action, plan_day
from town.tick.react import change_object, observe, react
from town.tick.state import ResidentState
from town.tick.turn import Tick
from town.world.gametime import at_clock, hhmm, spoken_day
from town.world.persona import ResidentSpec
from town.world.places import World

SUMMARY_WARM_AHEAD = timedelta(hours=1)  # a sleeper's summary queries are embedded this early
WAKE_GRACE = timedelta(hours=1)  # how long past its wake time a sleeper waits for the allowance


async def think(tick: Tick, resident: Resident, observed: list[Observation]) -> None:
    """The resident's part of the tick. At most one LLM call deep: rating what is new runs beside
    the one next step (day plan, reaction, object change or plan decomposition); whatever follows
    from that step waits for the next tick (``ResidentState`` carries it)."""
    state = tick.state(resident)
    spec = tick.specs[resident.name]
    if not state.awake:
        due = _time_to_wake(tick.now, spec, state)
        if due and (may_begin(tick) or _time_to_wake(tick.now - WAKE_GRACE, spec, state)):
            await _wake(tick, resident, spec, state)
        else:
            warm_before_waking(tick.stream(resident), resident, spec, state, tick.now)
        return
    if state.sleep_at and tick.now >= datetime.fromisoformat(state.sleep_at):
        _go_to_sleep(tick, resident, spec, state)
        return
    work: list[Coroutine[Any, Any, object]] = []
    if observed:
        work.append(observe(tick, resident, state, observed))
    step = _next_step(tick, resident, spec, state)
    if step is not None:
        work.append(step)
    await asyncio.gather(*work)


def _next_step(
    tick: Tick, resident: Resident, spec: ResidentSpec, state: ResidentState
) -> Coroutine[Any, Any, object] | None:
    if state.talk is not None:
        return None  # the conversation speaks for the resident (town/tick/dialogue.py)
    if state.plan_next:
        return _plan(tick, resident, spec, state)
    if state.object_next:
        return change_object(tick, resident, state)
    if state.noticed:
        return react(tick, resident, state)
    if state.reacting(tick.now) or state.with_visitor(tick.now):
        return None  # (a resident talking with a visitor stays for the exchange)
    return _follow_plan(tick, resident, spec, state)


def warm_before_waking(
    stream: MemoryStream,
    resident: Resident,
    spec: ResidentSpec,
    state: ResidentState,
    now: datetime,
) -> None:
    """In the hour before a sleeper wakes (or when the town is founded, for those who wake in
    its first hour), the summary description's queries are embedded, to be cached by then."""
    soon = now + SUMMARY_WARM_AHEAD
    if _time_to_wake(soon, spec, state) and resident.summary_day != soon.date():
        stream.warm(summary_queries(resident.name))


def may_begin(tick: Tick) -> bool:
    """Whether one more long thought (a wake-up, a reflection) may begin this tick (and is
    counted if so)."""
    allowed = tick.llm.begun_per_tick()
    if allowed is not None and tick.begun >= allowed:
        return False
    tick.begun += 1
    return True


def _time_to_wake(now: datetime, spec: ResidentSpec, state: ResidentState) -> bool:
    return state.day != now.date().isoformat() and now >= at_clock(now.date(), spec.wake_time)


async def _wake(tick: Tick, resident: Resident, spec: ResidentSpec, state: ResidentState) -> None:
    """Wake up; the summary description first when it is a day old, and the day plan after it
    (on the next tick, when the summary took this tick's call)."""
    today = tick.now.date()
    state.awake, state.day, state.item = True, today.isoformat(), None
    sleep_at = at_clock(today, spec.sleep_time)
    if sleep_at <= at_clock(today, spec.wake_time):
        sleep_at += timedelta(days=1)
    state.sleep_at = sleep_at.isoformat()
    resident.action, resident.emoji = "waking up", "🌅"
    tick.emit("woke", resident, f"{resident.name} is waking up", emoji="🌅")
    if resident.summary_day != today:
        resident.summary = await _summary(tick, resident, tick.stream(resident))
        resident.summary_day = today
        state.plan_next = True
    else:
        await _plan(tick, resident, spec, state)


async def _plan(tick: Tick, resident: Resident, spec: ResidentSpec, state: ResidentState) -> None:
    state.plan_next = False
    items = await plan_day(tick, resident, spec, state)
    tick.emit(
        "planned",
        resident,
        f"{resident.name}'s plan for {spoken_day(tick.now.date())}",
        plan=[f"{hhmm(i.start)} {i.description} ({i.location})" for i in items],
    )


async def _summary(tick: Tick, resident: Resident, stream: MemoryStream) -> str:
    """The paper's summary description: identity, occupation, feelings about recent progress."""
    name = resident.name
    texts: list[str] = []
    queries = summary_queries(name)
    for found in await stream.recall_each(tick.session, queries, tick.now, k=5):
        for got in found:
            if got.memory.text not in texts:
                texts.append(got.memory.text)
    result = await tick.brain.run(
        SUMMARIZE, SummarizeInput(resident=name, memories=texts), resident=name
    )
    return result.summary


def summary_queries(name: str) -> list[str]:
    """The summary description's three retrievals (embedded ahead: ``warm_before_waking``)."""
    return [
        f"{name}'s core characteristics",
        f"{name}'s current daily occupation",
        f"{name}'s feeling about his recent progress in life",
    ]


def _go_to_sleep(tick: Tick, resident: Resident, spec: ResidentSpec, state: ResidentState) -> None:
    state.awake, state.item, state.reaction_until = False, None, ""
    state.yesterday = f"{resident.name} spent {spoken_day(tick.now.date())} as planned"
    if resident.location != spec.home:
        _move(tick, resident, spec.home, state)
    resident.action, resident.emoji = "sleeping", "😴"
    tick.emit("slept", resident, f"{resident.name} is going to sleep", emoji="😴")


async def _follow_plan(
    tick: Tick, resident: Resident, spec: ResidentSpec, state: ResidentState
) -> None:
    if (
        state.item is not None
        and state.item_until
        and tick.now < datetime.fromisoformat(state.item_until)
    ):
        return  # the current action goes on: no need to look at the plan
    item = await current_action(tick, resident)
    if item is None or item.id == state.item:
        return
    state.item = item.id
    state.item_until = (item.start + timedelta(minutes=item.duration_min)).isoformat()
    target = tick.world.resolve(item.location, resident.location)
    if target != resident.location and _may_enter(tick, resident, spec, target):
        _move(tick, resident, target, state)
    if item.description == resident.action:
        return  # the same action goes on (the plan's next item says it again): no news
    resident.action, resident.emoji = item.description, item.emoji or "🙂"
    tick.emit(
        "action",
        resident,
        f"{resident.name} is {item.description}",
        emoji=resident.emoji,
        location=resident.location,
    )


def _may_enter(tick: Tick, resident: Resident, spec: ResidentSpec, target: str) -> bool:
    """Opening hours (staff excepted) and room sizes, which place names do not convey."""
    area = World.area_of(target)
    works_there = spec.workplace and World.area_of(spec.workplace) == area
    if not works_there and not tick.world.is_open(area, tick.now):
        return False
    capacity = tick.world.capacity(target)
    if capacity is None:
        return True
    inside = sum(1 for r in tick.residents.values() if r.location == target and r is not resident)
    return inside < capacity


def _move(tick: Tick, resident: Resident, target: str, state: ResidentState) -> None:
    before = resident.location
    old_area, new_area = World.area_of(before), World.area_of(target)
    resident.location = target
    state.known[new_area] = tick.now.isoformat()
    if old_area != new_area:
        tick.events.append(
            TownEvent(
                "moved",
                old_area,
                tick.now,
                resident.name,
                f"{resident.name} left for {new_area}",
                {"from": before, "to": target, "direction": "out"},
            )
        )
        tick.emit(
            "moved",
            resident,
            f"{resident.name} arrived",
            **{"from": before, "to": target, "direction": "in"},
        )

"""One resident's turn in a tick: wake or sleep, perceive, react, follow the plan (section 4.3).

``perceive`` is synchronous and reads the tick's starting snapshot, so residents thought about
concurrently all see the same world. ``think`` then spends LLM calls only where something is new:
a resident with nothing new follows its plan, and a plan chunk is decomposed only when it is due.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from sqlmodel import Session

from town.llm.offline.brain import emoji as offline_emoji
from town.llm.port import Brain
from town.llm.schemas import (
    EmojiInput,
    ObjectStateInput,
    RateImportanceInput,
    ReactInput,
    SummarizeInput,
)
from town.llm.tasks import OBJECT_STATE, RATE_IMPORTANCE, REACT, SUMMARIZE
from town.memory.stream import MemoryStream, NewMemory
from town.outbox.events import TownEvent
from town.store.models import Resident
from town.tick.planning import current_action, plan_day, replan_from_now
from town.tick.state import ResidentState
from town.world.gametime import at_clock, hhmm, spoken_day
from town.world.persona import ResidentSpec
from town.world.places import World

REACT_IMPORTANCE = 5  # an observation at least this important may interrupt the plan
GREET_IMPORTANCE = 1  # meeting someone (awake, not talked to lately) may start a talk
TALK_COOLDOWN_MIN = 120  # the same two residents talk again only after this long
REACTION_MIN = 15
SUMMARY_WARM_AHEAD = timedelta(hours=1)  # a sleeper's summary queries are embedded this early


@dataclass(frozen=True)
class Observation:
    key: str  # "@Name" for a resident, "object|<sub-area>|<object>", "inbox" for inputs
    text: str


@dataclass
class Tick:
    """Everything one tick shares among the residents thinking in it."""

    session: Session
    now: datetime
    world: World
    brain: Brain
    streams: Callable[[int], MemoryStream]
    residents: dict[str, Resident]
    specs: dict[str, ResidentSpec]
    start: dict[str, tuple[str, str, bool]] = field(default_factory=dict)  # location, action, awake
    events: list[TownEvent] = field(default_factory=list)
    # talks asked for this tick: (urged by an input, who, to whom); begun in the engine's order
    talks: list[tuple[bool, str, str]] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)  # resident -> the non-resident it answers
    states: dict[str, ResidentState] = field(default_factory=dict)
    _present: dict[str, list[tuple[str, str, bool]]] | None = field(default=None, repr=False)

    def state(self, resident: Resident) -> ResidentState:
        """The resident's state for this tick: one object shared by every unit of work that
        touches the resident, written back to the row by ``save_states``."""
        found = self.states.get(resident.name)
        if found is None:
            found = self.states[resident.name] = ResidentState.of(resident)
        return found

    def present(self, area: str) -> list[tuple[str, str, bool]]:
        """Who was in ``area`` when the tick began: (name, action, awake), in the residents'
        order."""
        if self._present is None:
            self._present = {}
            for name, (location, action, awake) in self.start.items():
                self._present.setdefault(World.area_of(location), []).append((name, action, awake))
        return self._present.get(area, [])

    def save_states(self) -> None:
        """Write each resident's state back to its row."""
        for name, state in self.states.items():
            row = self.residents[name]
            if state.save(row):
                self.session.add(row)

    def emit(self, kind: str, resident: Resident, text: str = "", **data: object) -> None:
        channel = World.area_of(resident.location)
        self.events.append(TownEvent(kind, channel, self.now, resident.name, text, dict(data)))

    def stream(self, resident: Resident) -> MemoryStream:
        assert resident.id is not None
        return self.streams(resident.id)


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


@lru_cache(maxsize=4096)  # (every awake resident says these of its area's objects each tick)
def _object_text(place: str, obj: str, obj_state: str) -> str:
    return f"the {obj} in {_spoken_place(place)} is {obj_state}"


@lru_cache(maxsize=1024)
def _spoken_place(place: str) -> str:
    """ "Hobbs Cafe: kitchen" -> "the kitchen of Hobbs Cafe" """
    parts = place.split(": ")
    return f"the {parts[-1]} of {parts[0]}" if len(parts) > 1 else parts[0]


async def think(tick: Tick, resident: Resident, observed: list[Observation]) -> None:
    """The resident's part of the tick. At most one LLM call deep: rating what is new runs beside
    the one next step (day plan, reaction, object change or plan decomposition); whatever follows
    from that step waits for the next tick (``ResidentState`` carries it)."""
    state = tick.state(resident)
    spec = tick.specs[resident.name]
    if not state.awake:
        if _time_to_wake(tick.now, spec, state):
            await _wake(tick, resident, spec, state)
        else:
            warm_before_waking(tick.stream(resident), resident, spec, state, tick.now)
        return
    if state.sleep_at and tick.now >= datetime.fromisoformat(state.sleep_at):
        _go_to_sleep(tick, resident, spec, state)
        return
    work: list[Coroutine[Any, Any, object]] = []
    if observed:
        work.append(_observe(tick, resident, state, observed))
    step = _next_step(tick, resident, spec, state)
    if step is not None:
        work.append(step)
    await asyncio.gather(*work)


def _next_step(
    tick: Tick, resident: Resident, spec: ResidentSpec, state: ResidentState
) -> Coroutine[Any, Any, object] | None:
    if state.talk is not None:
        return None  # the conversation speaks for the resident (town/dialogue.py)
    if state.plan_next:
        return _plan(tick, resident, spec, state)
    if state.object_next:
        return _change_object(tick, resident, state)
    if state.noticed:
        return _react(tick, resident, state)
    if state.reacting(tick.now):
        return None
    return _follow_plan(tick, resident, spec, state)


async def react_to(tick: Tick, resident: Resident, observed: list[Observation]) -> str | None:
    """Perceive-and-react at once, outside a tick (a visitor spoke): returns whom the resident
    wants to answer, if anyone who is not a resident."""
    state = tick.state(resident)
    if observed:
        await _observe(tick, resident, state, observed)
        if state.noticed.get("key") == "inbox":
            await _react(tick, resident, state)
    return tick.answers.get(resident.name)


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


async def _observe(
    tick: Tick, resident: Resident, state: ResidentState, observed: list[Observation]
) -> None:
    """Store what was observed, its importance rated in one call; the most salient of it, if
    anything, is what the resident reacts to on the next tick it is free."""
    name, stream = resident.name, tick.stream(resident)
    kinds = ["directive" if o.text.startswith("Inner voice:") else "observation" for o in observed]
    # embedded while their importance is being rated: recorded then, they find their vectors;
    # so is the relationship query of a reaction to anyone met (one text per pair, ever)
    stream.warm_memories([NewMemory(k, o.text, 1) for k, o in zip(kinds, observed, strict=True)])
    stream.warm([_react_queries(name, o)[0] for o in observed if o.key.startswith("@")])
    rated = await tick.brain.run(
        RATE_IMPORTANCE,
        RateImportanceInput(resident=name, observations=[o.text for o in observed]),
        resident=name,
    )
    scores = list(rated.scores) + [3] * (len(observed) - len(rated.scores))
    await stream.record(
        tick.session,
        [NewMemory(k, o.text, n) for k, o, n in zip(kinds, observed, scores, strict=False)],
        tick.now,
    )
    state.since_reflection += sum(scores)
    chosen = _most_salient(tick, state, observed, scores)
    if chosen is not None:  # while talking, it waits for the end of the talk
        state.noticed = {"key": chosen.key, "text": chosen.text}
        # the reaction's relationship query, embedded meanwhile (the observation, its other
        # query, is being embedded as a memory)
        stream.warm(_react_queries(name, chosen)[:1])


def _react_queries(name: str, obs: Observation) -> list[str]:
    """The paper's two retrievals before reacting: the relationship, and the observation."""
    subject = obs.key[1:] if obs.key.startswith("@") else obs.text
    return [f"What is {name}'s relationship with {subject}?", obs.text]


def _most_salient(
    tick: Tick, state: ResidentState, observed: list[Observation], scores: list[int]
) -> Observation | None:
    best: tuple[int, Observation] | None = None
    for obs, score in zip(observed, scores, strict=False):
        if obs.key == "inbox":
            rank = 100 + score
        elif obs.key.startswith("@"):
            other = obs.key[1:]
            cooled = not state.talked_recently(other, tick.now, TALK_COOLDOWN_MIN)
            awake = tick.start.get(other, ("", "", False))[2]
            rank = score if cooled and awake and score >= GREET_IMPORTANCE else -1
        else:
            rank = score if score >= REACT_IMPORTANCE else -1
        if rank >= 0 and (best is None or rank > best[0]):
            best = (rank, obs)
    return best[1] if best else None


async def _react(tick: Tick, resident: Resident, state: ResidentState) -> bool:
    """The paper's react step on what was noticed: two retrievals as context, then continue or
    react. Returns True if the resident reacted."""
    obs = Observation(state.noticed["key"], state.noticed["text"])
    state.noticed = {}
    name, stream = resident.name, tick.stream(resident)
    if obs.key.startswith("@"):  # a talk may begin: what each then recalls, embedded meanwhile
        stream.warm([obs.key[1:], name])
    about, context = await stream.recall_each(
        tick.session, _react_queries(name, obs), tick.now, k=[5, 3]
    )
    decision = await tick.brain.run(
        REACT,
        ReactInput(
            resident=name,
            current_action=resident.action,
            observation=obs.text,
            relationship=" ".join(r.memory.text for r in about),
            context=[r.memory.text for r in context],
        ),
        resident=name,
    )
    if not decision.react:
        return False
    reaction = decision.reaction.strip() or f"responding to {obs.text}"
    state.reaction = reaction
    state.reaction_until = (tick.now + timedelta(minutes=REACTION_MIN)).isoformat()
    state.item = None
    resident.action = reaction
    resident.emoji = offline_emoji(EmojiInput(action=reaction)).emoji
    replan_from_now(tick, resident)
    await stream.record(
        tick.session, [NewMemory("plan", f"{name} stopped to: {reaction}", 5)], tick.now
    )
    tick.emit("reacted", resident, f"{name} is {reaction}", emoji=resident.emoji, to=obs.text)
    if obs.key.startswith("object|"):
        state.object_next = {"key": obs.key, "reaction": reaction}
    other = (decision.talk_to or "").strip()
    if other and other not in tick.residents:
        tick.answers[name] = other  # a visitor: answered by the input that brought the words
    elif other in tick.residents and other != name:
        loc = tick.start.get(other, ("", "", False))
        same_area = World.area_of(loc[0]) == World.area_of(resident.location)
        urged = obs.key == "inbox"  # an inner voice or a visitor overrides the cooldown
        cooled = urged or not state.talked_recently(other, tick.now, TALK_COOLDOWN_MIN)
        if same_area and loc[2] and cooled:
            tick.talks.append((urged, name, other))
    return True


async def _change_object(tick: Tick, resident: Resident, state: ResidentState) -> None:
    """The object the resident reacted to, changed by its reaction (the tick after)."""
    key, action = state.object_next["key"], state.object_next["reaction"]
    state.object_next = {}
    _, place, obj = key.split("|", 2)
    old = tick.world.states.get((place, obj), "")
    new = await tick.brain.run(
        OBJECT_STATE, ObjectStateInput(object=obj, state=old, action=action), resident=resident.name
    )
    if new.state and new.state != old:
        tick.world.set_state(tick.session, place, obj, new.state)
        tick.emit(
            "object",
            resident,
            f"the {obj} in {place} is now {new.state}",
            object=f"{place}: {obj}",
            state=new.state,
        )


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

"""A resident's reaction to what it noticed (section 4.3): what is new is rated and stored; the
most salient of it may interrupt the plan, start a talk, or change the object reacted to.
"""

from __future__ import annotations

from datetime import timedelta

from town.llm.offline.text import emoji_for
from town.llm.schemas import (
    ObjectStateInput,
    RateImportanceInput,
    ReactInput,
    present_named,
)
from town.llm.tasks import OBJECT_STATE, RATE_IMPORTANCE, REACT
from town.memory.stream import NewMemory
from town.store.models import Resident
from town.tick.dialogue import NEWS_QUERY
from town.tick.perceive import Observation
from town.tick.planning import replan_from_now
from town.tick.state import ResidentState
from town.tick.turn import Tick
from town.world.places import World

REACT_IMPORTANCE = 5  # an observation at least this important may interrupt the plan
GREET_IMPORTANCE = 1  # meeting someone (awake, not talked to lately) may start a talk
TALK_COOLDOWN_MIN = 120  # the same two residents talk again only after this long
REACTION_MIN = 15


async def observe(
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


async def react(tick: Tick, resident: Resident, state: ResidentState) -> bool:
    """The paper's react step on what was noticed: two retrievals as context, then continue or
    react. Returns True if the resident reacted."""
    obs = Observation(state.noticed["key"], state.noticed["text"])
    state.noticed = {}
    name, stream = resident.name, tick.stream(resident)
    if obs.key.startswith("@"):  # a talk may begin: what each then recalls, embedded meanwhile
        stream.warm([obs.key[1:], name, NEWS_QUERY])
    about, context = await stream.recall_each(
        tick.session, _react_queries(name, obs), tick.now, k=[5, 3]
    )
    inputs = ReactInput(
        resident=name,
        current_action=resident.action,
        observation=obs.text,
        relationship=" ".join(r.memory.text for r in about),
        context=[r.memory.text for r in context],
        present=_talkable(tick, resident),
    )
    decision = await tick.brain.run(REACT, inputs, resident=name)
    if not decision.react:
        return False
    reaction = decision.reaction.strip() or f"responding to {obs.text}"
    state.reaction = reaction
    state.reaction_until = (tick.now + timedelta(minutes=REACTION_MIN)).isoformat()
    state.item = None
    resident.action = reaction
    resident.emoji = emoji_for(reaction)
    replan_from_now(tick, resident)
    await stream.record(
        tick.session, [NewMemory("plan", f"{name} stopped to: {reaction}", 5)], tick.now
    )
    tick.emit("reacted", resident, f"{name} is {reaction}", emoji=resident.emoji, to=obs.text)
    if obs.key.startswith("object|"):
        state.object_next = {"key": obs.key, "reaction": reaction}
    other = present_named(inputs, decision.talk_to)  # only ever someone there and awake
    if other is not None:
        urged = obs.key == "inbox"  # an inner voice or a visitor overrides the cooldown
        if urged or not state.talked_recently(other, tick.now, TALK_COOLDOWN_MIN):
            tick.talks.append((urged, name, other))
    return True


def _talkable(tick: Tick, resident: Resident) -> list[str]:
    """Whom the resident can talk to: the other residents at its area and awake when the tick
    began (a visitor is answered when heard, by ``town.inputs.chat``, never from a reaction)."""
    area = World.area_of(resident.location)
    return [n for n, _, awake in tick.present(area) if awake and n != resident.name]


async def change_object(tick: Tick, resident: Resident, state: ResidentState) -> None:
    """The object the resident reacted to, changed by its reaction (the tick after)."""
    key, action = state.object_next["key"], state.object_next["reaction"]
    state.object_next = {}
    _, place, obj = key.split("|", 2)
    old = tick.world.states.get((place, obj), "")
    new = await tick.brain.run(
        OBJECT_STATE, ObjectStateInput(object=obj, state=old, action=action), resident=resident.name
    )
    if new.state and new.state != old:
        tick.world.note_state(place, obj, new.state)
        written = tick.world.states[(place, obj)]
        tick.writes.append(lambda session: tick.world.write_state(session, place, obj, written))
        tick.emit(
            "object",
            resident,
            f"the {obj} in {place} is now {new.state}",
            object=f"{place}: {obj}",
            state=new.state,
        )

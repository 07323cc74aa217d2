"""Conversations between residents, turn by turn (Park et al., section 4.3, "Dialogue").

Each utterance comes from the speaker's summary description, its memories of the listener and the
conversation so far; the talk ends when a speaker says so or after ``MAX_TURNS``. One utterance
a tick, so a talk never lengthens a tick's chain of LLM calls; each is a town event, and the whole
talk is remembered by both on the tick after its last words, its importance rated in one call.
"""

from __future__ import annotations

import asyncio

from town.llm.made import made_by
from town.llm.schemas import RateImportanceInput, Utterance, UtterInput
from town.llm.tasks import RATE_IMPORTANCE, UTTER
from town.memory.stream import NewMemory
from town.store.ids import new_ids
from town.store.models import Conversation, Resident
from town.tick.planning import chunk_now
from town.tick.turn import Tick
from town.world.gametime import hhmm, spoken_day
from town.world.places import World

MAX_TURNS = 8
TALK_KINDS = ("seed", "observation", "chat", "reflection", "directive")  # what one talks about
# what a resident may bring up besides the listener: news it holds (recalled beside the listener)
NEWS_QUERY = "news worth sharing: an upcoming event or party, an election, what a visitor said"


async def begin(tick: Tick, first: Resident, second: Resident) -> Conversation:
    """Two residents at one place start talking: a conversation row, and what each recalls of
    the other and the news it holds (retrieval only, no LLM call), a private memory left out
    unless the other may hear it. The first words come on the next tick."""
    (talk_id,) = new_ids(tick.session, "conversation", 1)  # (made in Python: no flush)
    talk = Conversation(
        id=talk_id,
        town_id=tick.world.town_id,
        location=first.location,
        participants=[first.name, second.name],
        turns=[],
        started=tick.now,
    )
    tick.session.add(talk)
    tick.conversations[talk_id] = talk
    pairs = ((first, second), (second, first))
    recalled = await asyncio.gather(
        *(
            tick.stream(me).recall_each(
                tick.session, [other.name, NEWS_QUERY], tick.now, k=[6, 3], kinds=TALK_KINDS
            )
            for me, other in pairs
        )
    )
    everyone = list(tick.residents)
    for (me, other), (about, news) in zip(pairs, recalled, strict=True):
        spec, state = tick.specs[me.name], tick.state(me)
        told = [
            r.memory.text
            for r in about
            if not r.memory.private or spec.may_confide(r.memory.text, other.name, everyone)
        ][:4]
        told += [r.memory.text for r in news if not r.memory.private and r.memory.text not in told]
        state.talk, state.talk_memories = talk.id, told[:6]
        state.noticed = {}
        me.action, me.emoji = f"talking with {other.name}", "💬"
    return talk


async def step(tick: Tick, talk: Conversation) -> None:
    """One turn of a conversation a tick: the next speaker's utterance, from its summary, its
    memories of the listener and the talk so far. When the talk has ended (a speaker said so,
    ``MAX_TURNS``, or one of them left or fell asleep), the next step is remembering it: both
    store every utterance, their importance rated in one call, and are free again."""
    first, second = (tick.residents.get(name) for name in talk.participants)
    if first is None or second is None:
        talk.ended = talk.ended or tick.now
        for person in (first, second):
            if person is not None:
                _release(tick, person)
        return
    if talk.ended is None and not _still_together(tick, first, second):
        talk.ended = tick.now
    if talk.ended is not None:
        await _finish(tick, talk, first, second)
        return
    history = [Utterance.model_validate(t) for t in talk.turns]
    turn = len(history)
    speaker, listener = (first, second) if turn % 2 == 0 else (second, first)
    state = tick.state(speaker)
    reply = await tick.brain.run(
        UTTER,
        UtterInput(
            speaker=speaker.name,
            listener=listener.name,
            speaker_summary=_with_status(tick, speaker),
            relationship=" ".join(state.talk_memories[:3]),
            memories=state.talk_memories,
            history=history,
            location=speaker.location,
            directive=state.directive or None,
        ),
        resident=speaker.name,
    )
    text = " ".join(reply.text.split())[:1000]
    said = Utterance(speaker=speaker.name, text=text)
    talk.turns = [*talk.turns, said.model_dump()]
    # remembered by both when the talk ends: embedded now (one cache for all streams)
    tick.stream(speaker).warm_memories([NewMemory("chat", _line(said), 1)])
    tick.emit("said", speaker, text, to=listener.name, emoji=speaker.emoji, model=made_by(reply))
    state.directive = ""  # an inner voice has now had its say
    if (reply.end and turn >= 1) or turn + 1 >= MAX_TURNS:
        talk.ended = tick.now
    tick.session.add(talk)


def _with_status(tick: Tick, speaker: Resident) -> str:
    """The summary description and the speaker's status (what it was doing before the talk),
    as in the paper's dialogue prompt."""
    doing = tick.state(speaker).item
    item = tick.plan_item(doing) if doing else None
    now = f"It is {spoken_day(tick.now.date())}, {hhmm(tick.now)}."
    if item is None:
        chunk = chunk_now(tick, speaker)
        part = f" This part of the day {speaker.name} is {chunk.description}." if chunk else ""
        return f"{speaker.summary}{part} {now}"
    area = World.area_of(item.location)
    where = "" if " at " in item.description or area in item.description else f" at {area}"
    status = f"{speaker.summary} Right now {speaker.name} is {item.description}{where}."
    hour = tick.plan_item(item.parent_id) if item.parent_id else None
    chunk = tick.plan_item(hour.parent_id) if hour and hour.parent_id else None
    chunk = chunk or chunk_now(tick, speaker)  # (a reaction's item has no chunk above it)
    if chunk is not None and chunk.description != item.description:
        status += f" This part of the day {speaker.name} is {chunk.description}."
    return f"{status} {now}"


def _still_together(tick: Tick, first: Resident, second: Resident) -> bool:
    states = (tick.state(first), tick.state(second))
    same = World.area_of(first.location) == World.area_of(second.location)
    return same and all(s.awake and s.talk is not None for s in states)


async def _finish(tick: Tick, talk: Conversation, first: Resident, second: Resident) -> None:
    history = [Utterance.model_validate(t) for t in talk.turns]
    weight = await _remember(tick, first, second, history) if history else 0
    for person, other in ((first, second), (second, first)):
        state = tick.state(person)
        if history:
            state.talked[other.name] = tick.now.isoformat()
        state.since_reflection += weight
        _release(tick, person)
    tick.emit(
        "conversation",
        first,
        f"{first.name} and {second.name} talked",
        participants=[first.name, second.name],
        turns=len(history),
    )


def _release(tick: Tick, person: Resident) -> None:
    state = tick.state(person)
    state.talk, state.talk_memories = None, []
    state.item = None  # back to the plan: the action in force is looked up again


async def _remember(tick: Tick, first: Resident, second: Resident, history: list[Utterance]) -> int:
    """Both remember every utterance; returns the talk's summed importance."""
    lines = [_line(u) for u in history]
    rated = await tick.brain.run(
        RATE_IMPORTANCE,
        RateImportanceInput(resident=first.name, observations=lines),
        resident=first.name,
    )
    scores = list(rated.scores) + [3] * (len(lines) - len(rated.scores))
    for person in (first, second):
        await tick.stream(person).record(
            tick.session,
            [NewMemory("chat", line, n) for line, n in zip(lines, scores, strict=False)],
            tick.now,
        )
    return sum(scores)


def _line(said: Utterance) -> str:
    return f'{said.speaker} said: "{said.text}"'

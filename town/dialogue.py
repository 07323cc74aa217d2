"""Conversations between residents, turn by turn (Park et al., section 4.3, "Dialogue").

Each utterance comes from the speaker's summary description, its memories of the listener and the
conversation so far; the talk ends when a speaker says so or after ``MAX_TURNS``. Every utterance
is a town event, and the whole talk is remembered by both, its importance rated in one call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from town.llm.schemas import RateImportanceInput, Utterance, UtterInput
from town.llm.tasks import RATE_IMPORTANCE, UTTER
from town.memory import NewMemory
from town.state import ResidentState
from town.store.models import Conversation, Resident

if TYPE_CHECKING:
    from town.mind import Tick

MAX_TURNS = 8
TALK_KINDS = ("seed", "observation", "chat", "reflection", "directive")  # what one talks about


async def converse(tick: Tick, first: Resident, second: Resident) -> list[Utterance]:
    """Run one conversation between two residents at the same place; returns its utterances."""
    states = {r.name: ResidentState.of(r) for r in (first, second)}
    memories: dict[str, list[str]] = {}
    for me, other in ((first, second), (second, first)):
        found = await tick.stream(me).recall(
            tick.session, other.name, tick.now, k=4, kinds=TALK_KINDS
        )
        memories[me.name] = [r.memory.text for r in found]
    for person, other in ((first, second), (second, first)):
        person.action, person.emoji = f"talking with {other.name}", "💬"
    history: list[Utterance] = []
    for turn in range(MAX_TURNS):
        speaker, listener = (first, second) if turn % 2 == 0 else (second, first)
        state = states[speaker.name]
        reply = await tick.brain.run(
            UTTER,
            UtterInput(
                speaker=speaker.name,
                listener=listener.name,
                speaker_summary=speaker.summary,
                relationship=" ".join(memories[speaker.name][:3]),
                memories=memories[speaker.name],
                history=history,
                location=speaker.location,
                directive=state.directive or None,
            ),
            resident=speaker.name,
        )
        text = " ".join(reply.text.split())[:1000]
        history.append(Utterance(speaker=speaker.name, text=text))
        tick.emit("said", speaker, text, to=listener.name, emoji=speaker.emoji)
        state.directive = ""  # an inner voice has now had its say
        if reply.end and turn >= 1:
            break
    weight = await _remember(tick, first, second, history)
    for person, other in ((first, second), (second, first)):
        state = states[person.name]
        state.talked[other.name] = tick.now.isoformat()
        state.since_reflection += weight
        state.save(person)
    tick.session.add(
        Conversation(
            town_id=tick.world.town_id,
            location=first.location,
            participants=[first.name, second.name],
            turns=[u.model_dump() for u in history],
            started=tick.now,
            ended=tick.now,
        )
    )
    tick.emit(
        "conversation",
        first,
        f"{first.name} and {second.name} talked",
        participants=[first.name, second.name],
        turns=len(history),
    )
    return history


async def _remember(tick: Tick, first: Resident, second: Resident, history: list[Utterance]) -> int:
    """Both remember every utterance; returns the talk's summed importance."""
    lines = [f'{u.speaker} said: "{u.text}"' for u in history]
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

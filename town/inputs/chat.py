"""A visitor's chat with the residents at a place: who answers, what they remember of the
exchange so far, and the answer itself (one LLM call).

Who answers is a rule, not a call per resident: a resident addressed by name, mention or reply
(a platform reply to the resident's message; awake and there) answers; else one resident present
and awake, preferring one who answered this visitor lately (the thread goes on), then one not in
a conversation. "Everyone"/"all" in a greeting brings a second. Everyone there still perceives
the words, in the next tick's batch.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel import Session

from town.llm.made import made_by
from town.llm.port import Brain
from town.llm.schemas import Utterance, UtterInput
from town.llm.tasks import UTTER
from town.memory.stream import MemoryStream
from town.outbox import chatlog
from town.store.models import Resident
from town.text import Plain, plain
from town.tick.state import ResidentState
from town.world.gametime import hhmm, spoken_day

log = logging.getLogger(__name__)

HISTORY = 8  # exchanges of the thread given to the resident answering
MAX_ANSWERS = 2
_ROOM = re.compile(r"\b(everyone|everybody|all|folks|y'?all|guys)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Responder:
    """A resident who answers, as read when the words were heard."""

    id: int
    name: str
    summary: str
    location: str
    emoji: str
    action: str = ""
    persona: dict[str, Any] = field(default_factory=dict)


@dataclass
class Thread:
    """What was said between a visitor and the residents of a place lately, oldest first."""

    said: list[Utterance] = field(default_factory=list)
    answered_by: list[str] = field(default_factory=list)  # latest first


def thread(session: Session, town_id: int, area: str, key: str) -> Thread:
    """The visitor's last exchanges at ``area`` (``key``: its chat, ``chatlog.thread_of``):
    its words and the residents' answers to it, from the chat lines."""
    lines = chatlog.thread_lines(session, town_id, area, key, HISTORY)
    found = Thread(said=[Utterance(speaker=line.speaker, text=line.text) for line in lines])
    for line in reversed(lines):  # latest first
        if line.kind == chatlog.RESIDENT and line.speaker not in found.answered_by:
            found.answered_by.append(line.speaker)
    return found


def addressed(words: str, names: list[str]) -> list[str]:
    """The residents ``words`` name: by full or first name, or an @mention of either."""
    folded = words.casefold()
    found = []
    for name in names:
        first = name.split()[0].casefold()
        if name.casefold() in folded or re.search(rf"(?<!\w)@?{re.escape(first)}(?!\w)", folded):
            found.append(name)
    return found


def responders(
    words: str, present: list[Resident], talk: Thread, replying_to: str = ""
) -> list[Resident]:
    """Who answers ``words`` among those ``present`` (see the module's docstring).
    ``replying_to`` (the author of the message the words reply to, as the platform says) is
    addressed like a name, and answers first; only a resident present and awake can."""
    awake = [r for r in present if ResidentState.of(r).awake]
    named = addressed(words, [r.name for r in awake])
    replied = [r for r in awake if replying_to and r.name == replying_to]
    if replied or named:
        rest = [r for r in awake if r.name in named and r not in replied]
        return [*replied, *rest][:MAX_ANSWERS]
    lately = {name: i for i, name in enumerate(talk.answered_by)}
    ranked = sorted(
        awake,
        key=lambda r: (lately.get(r.name, len(lately)), ResidentState.of(r).talk is not None),
    )
    return ranked[: 2 if _ROOM.search(words) else 1]


@dataclass
class Recalled:
    """What a resident recalls before answering a visitor: of the visitor, and for the words."""

    about: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)


async def recall(
    stream: MemoryStream,
    session: Session,
    resident: Responder,
    visitor: str,
    words: str,
    now: datetime,
) -> Recalled:
    """What the resident recalls of the visitor (the relationship retrieval it uses for
    residents), of the words, of its day and of the town's news; never a private memory (a
    feeling, a secret). Reads only: the session can close before the answer is thought."""
    queries = [
        f"What is {resident.name}'s relationship with {visitor}?",
        f"{visitor}: {words}",
        f"{resident.name}'s plans for today",
        f"news and events in town that {resident.name} knows of",
    ]
    try:
        about, context, *day = await stream.recall_each(session, queries, now, k=[3, 6, 8, 3])
    except Exception as error:
        # (a process beside the one running the town may find the vector index mid-write)
        log.warning("%s answers without recalling: %s", resident.name, error)
        about, context, day = [], [], []
    context = [*context, *(r for found in day for r in found)]
    told = {r.memory.text: r for r in context if not r.memory.private}
    return Recalled(
        about=[r.memory.text for r in about if not r.memory.private],
        context=[text for text in told if words not in text],
    )


async def answer(
    brain: Brain,
    resident: Responder,
    visitor: str,
    words: str,
    talk: Thread,
    now: datetime,
    recalled: Recalled,
) -> tuple[Plain, str]:
    """The resident's answer to the visitor's ``words``: what it ``recall``ed, the thread so
    far, then one ``utter`` call (made holding nothing). The words as a plain line (a model's
    ping syntax taken out), and who made them (the model, or the offline brain and why:
    :mod:`town.llm.made`)."""
    history = talk.said or [Utterance(speaker=visitor, text=words)]
    if history[-1].text != words or history[-1].speaker != visitor:
        history = [*history, Utterance(speaker=visitor, text=words)]
    reply = await brain.run(
        UTTER,
        UtterInput(
            speaker=resident.name,
            listener=visitor,
            speaker_summary=situation(resident, now),
            relationship=" ".join(recalled.about),
            memories=recalled.context,
            history=history,
            location=resident.location,
            visitor=True,
        ),
        resident=resident.name,
    )
    return plain(reply.text, 1000), made_by(reply)


def situation(resident: Responder, now: datetime) -> str:
    """The resident as a visitor meets it: its summary, who it is (age, work, traits, home),
    what it is doing where, and the hour."""
    name, persona = resident.name, resident.persona
    lines = [resident.summary]
    if persona.get("occupation"):
        traits = list(persona.get("traits", []))
        listed = (
            ", ".join(traits[:-1]) + f" and {traits[-1]}" if len(traits) > 1 else "".join(traits)
        )
        lines.append(
            f"{name}, {persona.get('age', '')}, is {_work(persona['occupation'])}; {listed}."
        )
    if persona.get("home"):
        lines.append(f"{name} lives at {str(persona['home']).split(':')[0]}.")
    if resident.action:
        area = resident.location.split(":")[0]
        where = "" if area in resident.action else f" at {area}"
        lines.append(f"Right now {name} is {resident.action}{where}.")
    lines.append(f"It is {spoken_day(now.date())}, {hhmm(now)}.")
    return " ".join(line for line in lines if line)


def _work(occupation: str) -> str:
    """An occupation with its article: "the owner of Hobbs Cafe", "a retired Navy officer"."""
    if re.match(r"(?:a|an|the)\s", occupation, re.IGNORECASE):
        return occupation
    if re.match(r"\w+(?: \w+)? of ", occupation):
        return f"the {occupation}"
    return f"{'an' if occupation[:1].lower() in 'aeiou' else 'a'} {occupation}"

"""A visitor in the town: joins with a name and a role, and speaks at a place.

A visitor's words reach residents only as a quoted observation, never as an instruction (only
an admin's inner voice is a directive, ``town.inputs.admin``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from uuid import uuid4

from sqlmodel import Session, select

from town.inputs.handlers import Visit, place_handlers
from town.inputs.limits import VisitorRateLimit
from town.inputs.unit import area_named, clean_text, input_unit
from town.llm.schemas import Utterance, UtterInput
from town.llm.tasks import UTTER
from town.memory.stream import NewMemory
from town.outbox import audit
from town.outbox.events import TownEvent, write_outbox
from town.store.models import Resident, Visitor
from town.tick.engine import Engine
from town.tick.perceive import perceive
from town.tick.react import react_to
from town.tick.turn import Tick
from town.world.places import World

MAX_INPUT_CHARS = 2000
MAX_REPLIES = 2  # a visitor's "hi" in a full cafe gets at most this many answers


@dataclass
class SayResult:
    area: str
    heard_by: list[str] = field(default_factory=list)
    replies: list[TownEvent] = field(default_factory=list)
    limited: bool = False  # over the visitor's message rate: nobody heard it


async def say(
    engine: Engine,
    location: str,
    speaker: str,
    text: str,
    *,
    role: str = "",
    platform: str = "cli",
    user_id: str = "",
    rate: VisitorRateLimit | None = None,
) -> SayResult:
    """A visitor speaks at a location: an observation for every resident there (asleep ones
    remember it on waking); awake ones perceive and may react at once, and at most
    ``MAX_REPLIES`` of them answer, a resident addressed by name first. A place with a handler
    (``town.inputs.handlers``) may answer first, through one resident who then does not react.

    Over ``rate`` (a visitor's messages per minute), nobody hears it: it is only audited, and
    the first such message of a minute gets the visitor one polite notice in the channel."""
    words = clean_text(text)
    if not words:
        raise ValueError("say what? the message is empty")
    who = clean_text(speaker, 80) or "a visitor"
    async with input_unit(engine) as unit:
        session = unit.session
        tick = engine.new_tick(session, unit.clock)
        area = area_named(tick.world, location)
        visitor = _known_visitor(session, engine.town_id, platform, user_id or who)
        if visitor is None or role:
            _remember_visitor(session, engine.town_id, platform, user_id or who, who, role)
        else:  # a visitor who joined keeps the name and role they chose
            who, role = visitor.display_name, visitor.role
        logged_as = audit.identity(who, platform, user_id)
        verdict = rate.check(platform, user_id or who) if rate is not None else None
        if verdict is not None and not verdict.allowed:
            unit.audit(audit.IN, audit.LIMITED, logged_as, words, platform=platform, channel=area)
            if verdict.notify and rate is not None:
                notice = _rate_notice(who, area, unit.clock, platform, rate.per_minute)
                write_outbox(session, engine.town_id, f"notice:{uuid4().hex}", [notice])
            return SayResult(area, limited=True)
        quoted = f'{who}{f" ({clean_text(role, 200)})" if role else ""} said: "{words}"'
        present = [r for r in tick.residents.values() if World.area_of(r.location) == area]
        result = SayResult(area, [r.name for r in present])
        handler = place_handlers(engine).get(area.casefold())
        handled = None
        if handler is not None:
            handled = await handler(tick, Visit(area, who, role, words, platform, user_id))
        if handled is not None:  # the place's own answer (a mock interview), not small talk
            result.replies.append(handled)
            present = [r for r in present if r.name != handled.resident]
        responders: list[Resident] = []
        for row in present:
            state = tick.state(row)
            state.inbox.append(quoted)
            if state.awake and await react_to(tick, row, perceive(tick, row, state)) == who:
                responders.append(row)
        addressed = [r for r in present if r.name.split()[0].casefold() in words.casefold()]
        ordered = [r for r in addressed if r in responders] + [
            r for r in responders if r not in addressed
        ]
        if not ordered and ("?" in words or addressed):
            ordered = [r for r in addressed or present if tick.state(r).awake][:1]
        for row in ordered[:MAX_REPLIES]:
            result.replies.append(await _reply(tick, row, who, words))
        tick.save_states()
        # audited after the LLM's answers: an early write would hold SQLite's lock
        unit.audit(audit.IN, "say", logged_as, words, platform=platform, channel=area)
        write_outbox(session, engine.town_id, f"say:{uuid4().hex}", tick.events)
    return result


async def join(
    engine: Engine, platform: str, user_id: str, name: str, role: str = ""
) -> tuple[str, str]:
    """A visitor takes a name and a role; returns them as stored."""
    who, what = clean_text(name, 80), clean_text(role, 200)
    if not who:
        raise ValueError("join as whom? give a name")
    async with input_unit(engine) as unit:
        _remember_visitor(unit.session, engine.town_id, platform, user_id, who, what)
    return who, what


async def _reply(tick: Tick, resident: Resident, visitor: str, words: str) -> TownEvent:
    found = await tick.stream(resident).recall(tick.session, f"{visitor}: {words}", tick.now, k=6)
    reply = await tick.brain.run(
        UTTER,
        UtterInput(
            speaker=resident.name,
            listener=visitor,
            speaker_summary=resident.summary,
            relationship="",
            memories=[
                r.memory.text for r in found if words not in r.memory.text and not r.memory.private
            ],
            history=[Utterance(speaker=visitor, text=words)],
            location=resident.location,
        ),
        resident=resident.name,
    )
    text = clean_text(reply.text, 1000)
    await tick.stream(resident).record(
        tick.session,
        [NewMemory("chat", f'{resident.name} said to {visitor}: "{text}"', 4)],
        tick.now,
    )
    tick.emit("said", resident, text, to=visitor, emoji=resident.emoji)
    return tick.events[-1]


def _known_visitor(session: Session, town_id: int, platform: str, user_id: str) -> Visitor | None:
    return session.exec(
        select(Visitor).where(
            Visitor.town_id == town_id,
            Visitor.platform == platform,
            Visitor.platform_user_id == user_id[:100],
        )
    ).first()


def _remember_visitor(
    session: Session, town_id: int, platform: str, user_id: str, name: str, role: str
) -> None:
    row = _known_visitor(session, town_id, platform, user_id)
    if row is None:
        row = Visitor(
            town_id=town_id,
            platform=platform,
            platform_user_id=user_id[:100],
            display_name=name[:80],
            role=role[:200],
        )
    else:
        row.display_name, row.role = name[:80], role[:200] or row.role
    session.add(row)


def _rate_notice(who: str, area: str, clock: datetime, platform: str, per_minute: int) -> TownEvent:
    """The polite word a visitor gets, once a minute, when writing faster than the town hears."""
    text = (
        f"{who}: you are writing faster than the town can listen (at most {per_minute} "
        "messages a minute), so nobody here heard your last words. Please wait a moment."
    )
    return TownEvent("notice", area, clock, "", text, {"to": who, "for_platform": platform})

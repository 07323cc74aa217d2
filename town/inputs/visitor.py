"""A visitor in the town: joins with a name and a role, and speaks at a place.

A visitor's words reach residents only as a quoted observation, never as an instruction (only
an admin's inner voice is a directive, ``town.inputs.admin``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from uuid import uuid4

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from town.inputs import chat, consent
from town.inputs.handlers import Visit, place_handlers
from town.inputs.limits import VisitorRateLimit
from town.inputs.naming import visitor_name
from town.inputs.unit import area_named, clean_text, input_unit
from town.llm.depth import chained
from town.outbox import audit
from town.outbox.events import TownEvent, write_outbox
from town.store.models import AuditEntry, Delivery, Resident, Visitor
from town.tick.engine import Engine
from town.world.places import World

MAX_INPUT_CHARS = 2000
NOTICE_AGAIN_MIN = 60  # "nobody here is awake" is told a visitor once in this many game minutes
Typing = Callable[[str, str], Awaitable[None]]  # (area, resident): a resident starts composing
# An answer posted at once, ahead of the store (a running town's adapters): the platforms that
# showed it, each with its message id; the outbox then records it as sent there.
# (Called with the event and the key its outbox row will have.)
Express = Callable[[TownEvent, str], Awaitable[dict[str, str]]]


@dataclass
class SayResult:
    area: str
    heard_by: list[str] = field(default_factory=list)
    replies: list[TownEvent] = field(default_factory=list)
    limited: bool = False  # over the visitor's message rate: nobody heard it
    chain: int = 0  # the longest chain of LLM calls before a reply (see town/llm/depth.py)


@dataclass
class _Heard:
    """A visitor's words as heard (read, nothing written yet): where, who answers, the thread
    so far, and what the one write at the end records."""

    result: SayResult
    clock: datetime
    who: str = ""
    role: str = ""
    logged_as: str = ""
    new_visitor: bool = False  # the visitor row is written with the words
    answering: list[chat.Responder] = field(default_factory=list)
    thread: chat.Thread = field(default_factory=chat.Thread)
    notices: list[TownEvent] = field(default_factory=list)
    handled: bool = False  # the place has a handler of its own (an interview room)


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
    typing: Typing | None = None,
    express: Express | None = None,
    connection: str = "",
    replying_to: str = "",
) -> SayResult:
    """A visitor speaks at a location, as in a chat. No lock on the town is taken, and nothing
    a tick reads is written, so visitors anywhere (in this process or another) and the tick go
    on side by side.

    1. Heard (reads only): who answers, by rule (``town.inputs.chat``): the residents
       addressed (``replying_to``: the resident whose message the words reply to on the
       platform), else one or two present and awake.
    2. Each answer is one LLM call (``typing`` is told when a resident starts composing), and
       with ``express`` posted at once, ahead of the store.
    3. One short write: the visitor, the words (their audit row is what every resident
       present perceives at the next tick, rated and reacted to in its batch; asleep ones on
       waking: ``town.tick.heard``), the answers (outbox and audit). Where nobody is awake or
       nobody is, the visitor is told so once.

    A place with a handler (``town.inputs.handlers``) answers in a unit of work of its own.
    A visitor's name that could pass for a resident, an inner voice or a mention is marked
    (``town.inputs.naming``). Over ``rate`` (a visitor's messages per minute) nobody hears it:
    it is only audited, and the first such message of a minute gets one polite notice. A
    ``connection`` (the web's peer address) has an allowance of its own beside the visitor's,
    so ids a page makes up do not multiply it."""
    words = clean_text(text)
    if not words:
        raise ValueError("say what? the message is empty")
    name = clean_text(speaker, 80) or "a visitor"
    user = user_id or name
    keys = [user, *([f"connection:{connection}"] if connection else [])]
    if (area := consent.unanswered(engine, location, name, words, platform, user)) is not None:
        return SayResult(area)  # a muted member, or a closed place (town.inputs.consent)
    heard = _hear(engine, location, name, words, role, platform, user, rate, keys, replying_to)
    if heard.handled:
        return await _say_to_place(engine, heard.result.area, name, words, role, platform, user_id)
    replies = [chained(_reply(engine, heard, r, words, typing, express)) for r in heard.answering]
    shown: list[tuple[str, dict[str, str]]] = []
    for (reply, tick_key, posted), length in await asyncio.gather(*replies):
        heard.result.replies.append(reply)
        shown.append((tick_key, posted))
        heard.result.chain = max(heard.result.chain, length)
    await asyncio.to_thread(_write, engine, heard, words, platform, user, shown)
    return heard.result


def _hear(
    engine: Engine,
    location: str,
    name: str,
    words: str,
    role: str,
    platform: str,
    user_id: str,
    rate: VisitorRateLimit | None,
    rate_keys: list[str],
    replying_to: str = "",
) -> _Heard:
    """What hearing the words reads: the place, the visitor, the thread, who answers."""
    with Session(engine.store.engine, expire_on_commit=False) as session:  # reads only
        clock = engine.town(session).clock
        area = area_named(World.load(session, engine.town_id, engine.spec), location)
        heard = _Heard(SayResult(area), clock)
        if area.casefold() in place_handlers(engine):
            heard.handled = True
            return heard
        residents = engine.residents(session)
        known = _known_visitor(session, engine.town_id, platform, user_id)
        if known is not None and not role:  # a visitor who joined keeps name and role
            heard.who, heard.role = visitor_name(known.display_name, residents), known.role
        else:
            heard.who, heard.role, heard.new_visitor = _marked(name, residents), role, True
        heard.logged_as = audit.identity(heard.who, platform, user_id)
        verdicts = [rate.check(platform, key) for key in rate_keys] if rate is not None else []
        if not all(v.allowed for v in verdicts):
            if any(v.notify for v in verdicts) and rate is not None:
                heard.notices.append(
                    _rate_notice(heard.who, area, clock, platform, rate.per_minute)
                )
            heard.result.limited = True
            return heard
        heard.thread = chat.thread(session, engine.town_id, area, heard.logged_as, heard.who)
        present = [r for r in residents.values() if World.area_of(r.location) == area]
        heard.result.heard_by = [r.name for r in present]
        heard.answering = [
            chat.Responder(
                r.id or 0, r.name, r.summary, r.location, r.emoji, r.action, dict(r.persona)
            )
            for r in chat.responders(words, present, heard.thread, replying_to)
        ]
        if not heard.answering and not _told_lately(
            session, engine.town_id, area, heard.who, platform, clock
        ):
            heard.notices.append(
                _nobody_notice(heard.who, area, clock, platform, asleep=bool(present))
            )
        return heard


async def _reply(
    engine: Engine,
    heard: _Heard,
    resident: chat.Responder,
    words: str,
    typing: Typing | None,
    express: Express | None,
) -> tuple[TownEvent, str, dict[str, str]]:
    """One resident's answer, composed outside any lock and posted at once (``express``);
    returns it with its outbox key's tick part and the platforms that showed it."""
    area = heard.result.area
    if typing is not None:
        await typing(area, resident.name)
    with Session(engine.store.engine, expire_on_commit=False) as session:  # reads only
        text = await chat.answer(
            engine.brain,
            engine.streams(resident.id),
            session,
            resident,
            heard.who,
            words,
            heard.thread,
            heard.clock,
        )
    data = {"to": heard.who, "reply_to": heard.who, "emoji": resident.emoji}
    event = TownEvent("said", area, heard.clock, resident.name, text, data)
    tick_key = f"say:{uuid4().hex}"
    key = f"{engine.town_id}:{tick_key}:0"  # (as ``write_outbox`` keys the row)
    return event, tick_key, (await express(event, key) if express is not None else {})


def _write(
    engine: Engine,
    heard: _Heard,
    words: str,
    platform: str,
    user_id: str,
    shown: list[tuple[str, dict[str, str]]],
) -> None:
    """``_store``, once more if a message of the same new visitor (from another process, say)
    stored the visitor first."""
    try:
        _store(engine, heard, words, platform, user_id, shown)
    except IntegrityError:
        _store(engine, heard, words, platform, user_id, shown)


def _store(
    engine: Engine,
    heard: _Heard,
    words: str,
    platform: str,
    user_id: str,
    shown: list[tuple[str, dict[str, str]]],
) -> None:
    """The one write of a visitor's words: the visitor, the words' audit row, the notices,
    and the answers (outbox and audit), each recorded as sent where ``express`` showed it."""
    area, clock = heard.result.area, heard.clock
    kind = audit.LIMITED if heard.result.limited else audit.SAY
    # checked by the engine's guard (a worker's lease) like a tick; the town's revision is
    # left alone: nothing a tick reads is written
    with engine.unit(changes_town=False) as session:
        if heard.new_visitor:
            _remember_visitor(session, engine.town_id, platform, user_id, heard.who, heard.role)
        audit.record(
            session,
            engine.town_id,
            audit.IN,
            kind,
            heard.logged_as,
            words,
            game_time=clock,
            platform=platform,
            channel=area,
        )
        write_outbox(session, engine.town_id, f"notice:{uuid4().hex}", heard.notices)
        for event, (tick_key, posted) in zip(heard.result.replies, shown, strict=True):
            (row,) = write_outbox(session, engine.town_id, tick_key, [event])
            session.flush()
            assert row.id is not None
            for where, message_id in posted.items():
                session.add(
                    Delivery(outbox_id=row.id, platform=where, status="sent", message_id=message_id)
                )
    if engine.after_commit:
        engine.after_commit()


def _marked(name: str, residents: dict[str, Resident]) -> str:
    """The visitor's name, marked if it could pass for another (kept within 80 characters)."""
    who = visitor_name(name, residents)
    return who if who == name else visitor_name(name[:64], residents)


async def _say_to_place(
    engine: Engine, area: str, name: str, words: str, role: str, platform: str, user_id: str
) -> SayResult:
    """Words at a place with a handler (an interview room): the handler answers through one
    resident, in one unit of work; the others there hear the words at once."""
    async with input_unit(engine) as unit:
        session = unit.session
        tick = engine.new_tick(session, unit.clock)
        residents = tick.residents
        who, role = _visitor(
            session, engine.town_id, platform, user_id or name, name, role, residents
        )
        result = SayResult(area)
        present = [r for r in residents.values() if World.area_of(r.location) == area]
        result.heard_by = [r.name for r in present]
        handler = place_handlers(engine)[area.casefold()]
        handled = await handler(tick, Visit(area, who, role, words, platform, user_id))
        if handled is not None:  # the place's own answer (a mock interview), not small talk
            result.replies.append(handled)
            present = [r for r in present if r.name != handled.resident]
        for row in present:
            tick.state(row).inbox.append(quoted(who, role, words))
        tick.save_states()
        logged_as = audit.identity(who, platform, user_id)
        unit.audit(audit.IN, "say:place", logged_as, words, platform=platform, channel=area)
        write_outbox(session, engine.town_id, f"say:{uuid4().hex}", tick.events)
    return result


def quoted(who: str, role: str, words: str) -> str:
    """A visitor's words as residents perceive them: a quotation, never an instruction."""
    return f'{who}{f" ({clean_text(role, 200)})" if role else ""} said: "{words}"'


async def join(
    engine: Engine, platform: str, user_id: str, name: str, role: str = ""
) -> tuple[str, str]:
    """A visitor takes a name and a role; returns them as stored (the name marked if it could
    pass for a resident, an inner voice or a mention: ``town.inputs.naming``)."""
    who, what = clean_text(name, 80), clean_text(role, 200)
    if not who:
        raise ValueError("join as whom? give a name")
    async with input_unit(engine, changes_town=False) as unit:
        residents = engine.residents(unit.session)
        return _visitor(unit.session, engine.town_id, platform, user_id, who, what, residents)


def _visitor(
    session: Session,
    town_id: int,
    platform: str,
    user_id: str,
    name: str,
    role: str,
    residents: dict[str, Resident],
) -> tuple[str, str]:
    """The visitor's name (marked if need be) and role as stored: a visitor who joined keeps
    the name and role they chose unless a new role comes with the words."""
    known = _known_visitor(session, town_id, platform, user_id)
    if known is not None and not role:
        return visitor_name(known.display_name, residents), known.role
    who = visitor_name(name, residents)
    if who != name:  # the marker kept whole within the column's 80 characters
        who = visitor_name(name[:64], residents)
    _remember_visitor(session, town_id, platform, user_id, who, role)
    return who, role


def _told_lately(
    session: Session, town_id: int, area: str, who: str, platform: str, clock: datetime
) -> bool:
    """Whether the visitor was told lately that nobody here is awake (or here at all)."""
    since = clock - timedelta(minutes=NOTICE_AGAIN_MIN)
    return (
        session.exec(
            select(AuditEntry.id).where(
                AuditEntry.town_id == town_id,
                AuditEntry.channel == area,
                AuditEntry.kind == "notice",
                AuditEntry.platform == platform,
                col(AuditEntry.game_time) >= since,
                col(AuditEntry.text).startswith(f"{who}: nobody"),
            )
        ).first()
        is not None
    )


def _nobody_notice(
    who: str, area: str, clock: datetime, platform: str, *, asleep: bool
) -> TownEvent:
    """The word a visitor gets where nobody can answer: all asleep, or nobody there."""
    if asleep:
        text = (
            f"{who}: nobody here is awake right now; the residents asleep here will "
            "remember your words when they wake."
        )
    else:
        text = f"{who}: nobody is at {area} right now; try another place."
    return TownEvent("notice", area, clock, "", text, {"to": who, "for_platform": platform})


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

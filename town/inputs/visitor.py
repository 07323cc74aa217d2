"""A visitor in the town: joins with a name and a role, and speaks at a place.

A visitor's words reach residents only as a quoted observation, never as an instruction (only
an admin's inner voice is a directive, ``town.inputs.admin``), and with no mention syntax or
mass ping: the adapter made them plain once (``Visit.of``, ``town.text.spoken``), and nothing
here cleans them again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from uuid import uuid4

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session

from town.inputs import chat, consent
from town.inputs.handlers import place_handlers
from town.inputs.joining import join, known_name, known_visitor, marked, remember_visitor
from town.inputs.limits import VisitorRateLimit
from town.inputs.placed import say_to_place
from town.inputs.unit import area_named
from town.inputs.visit import EmptyWords, Visit
from town.llm import urgency
from town.llm.depth import chained
from town.outbox import audit, chatlog
from town.outbox.events import TownEvent, write_outbox
from town.text import Name, Plain, name_of, plain
from town.tick.engine import Engine
from town.world.places import World

__all__ = ["EmptyWords", "SayResult", "Visit", "join", "say"]

NOTICE_AGAIN_MIN = 60  # "nobody here is awake" is told a visitor once in this many game minutes
Typing = Callable[[str, str], Awaitable[None]]  # (area, resident): a resident starts composing
Post = Callable[[list[int]], Awaitable[None]]  # posts stored outbox rows at once (the platforms)


@dataclass
class SayResult:
    area: str
    heard_by: list[str] = field(default_factory=list)
    replies: list[TownEvent] = field(default_factory=list)
    limited: bool = False  # over the visitor's message rate: nobody heard it
    chain: int = 0  # the longest chain of LLM calls before a reply (see town/llm/depth.py)
    outbox_ids: list[int] = field(default_factory=list)  # the answers' rows, stored, to post


@dataclass
class _Heard:
    """A visitor's words as heard (read, nothing written yet): where, who answers, the thread
    so far, and what the one write at the end records."""

    result: SayResult
    clock: datetime
    visit: Visit
    who: Name = field(default_factory=lambda: name_of(""))  # as shown (marked if need be)
    role: str = ""
    new_visitor: bool = False  # the visitor row is written with the words
    addressee: str = ""  # the resident the words were said to ("" the room)
    answering: list[chat.Responder] = field(default_factory=list)
    thread: chat.Thread = field(default_factory=chat.Thread)
    notices: list[TownEvent] = field(default_factory=list)
    handled: bool = False  # the place has a handler of its own (an interview room)

    @property
    def thread_key(self) -> str:
        return chatlog.thread_of(self.visit.platform, self.visit.user_id)


async def say(
    engine: Engine,
    visit: Visit,
    *,
    rate: VisitorRateLimit | None = None,
    typing: Typing | None = None,
    post: Post | None = None,
) -> SayResult:
    """A visitor speaks at a place, as in a chat. No lock on the town is taken, and nothing a
    tick reads is written, so visitors anywhere (in this process or another) and the tick go on
    side by side.

    1. Heard (reads only): who answers, by rule (``town.inputs.chat``): the residents
       addressed (``visit.replying_to``: the resident whose message the words reply to on the
       platform), else one or two present and awake; one only while the LLM server is busy.
    2. One short write, beside the thinking: the visitor, its words as a chat line
       (``town.outbox.chatlog``: what every resident present takes in at the next tick, rated
       and reacted to in its batch; asleep ones on waking: ``town.tick.heard``), the audit
       row, and where nobody is awake or nobody is, the notice that says so (once).
    3. Each answer is one LLM call (``typing`` is told when a resident starts composing; to
       words addressed to nobody, the offline brain's line if the server cannot take the call
       within about a call's time: ``town.llm.urgency.to_everyone``),
       then one short write of its own (its chat line and outbox event), then ``post``ed at
       once (the platforms; ``SayResult.outbox_ids`` lists the rows), without waiting for the
       other resident's answer.

    Words empty once cleaned raise :class:`EmptyWords` and store nothing. A place with a
    handler (``town.inputs.handlers``) answers in a unit of work of its own. A visitor's name
    that could pass for a resident, an inner voice or a mention is marked
    (``town.inputs.naming``). Over ``rate`` (a visitor's messages per minute) nobody hears it:
    it is only recorded, and the first such message of a minute gets one polite notice. A
    ``visit.connection`` (the web's peer address) has an allowance of its own beside the
    visitor's, so ids a page makes up do not multiply it."""
    if (area := consent.muted_words(engine, visit)) is not None:
        return SayResult(area)  # a muted member: audited as received, nothing else
    heard = _hear(engine, visit, rate)
    if consent.closed_at(engine, heard.result.area):  # heard at the next tick, never answered
        heard.answering, heard.notices = [], []
    if heard.handled:
        return await _say_to_place(engine, heard.result.area, visit)
    # the words are written while the answers are thought (never after: an answer waits)
    words = asyncio.ensure_future(asyncio.to_thread(_write, engine, heard))
    answers = [chained(_answer(engine, heard, r, typing, post, words)) for r in heard.answering]
    try:
        done = await asyncio.gather(*answers)
    finally:
        await words  # (its failure, a lost lease say, is the caller's)
    for answered, length in done:
        if answered is None:  # forgotten or muted while it was composed
            continue
        reply, outbox_id = answered
        heard.result.replies.append(reply)
        heard.result.outbox_ids.append(outbox_id)
        heard.result.chain = max(heard.result.chain, length)
    return heard.result


def _hear(engine: Engine, visit: Visit, rate: VisitorRateLimit | None) -> _Heard:
    """What hearing the words reads: the place, the visitor, the thread, who answers."""
    words = visit.spoken.heard
    with Session(engine.store.engine, expire_on_commit=False) as session:  # reads only
        clock = engine.town(session).clock
        area = area_named(World.load(session, engine.town_id, engine.spec), visit.area)
        heard = _Heard(SayResult(area), clock, replace(visit, area=area))
        if area.casefold() in place_handlers(engine):
            heard.handled = True
            return heard
        residents = engine.residents(session)
        known = known_visitor(session, engine.town_id, visit.platform, visit.user_id)
        if known is not None and not visit.role:  # a visitor who joined keeps name and role
            heard.who, heard.role = known_name(known, residents), known.role
        else:
            heard.who, heard.role = marked(visit.name, residents), visit.role
            heard.new_visitor = True
        keys = [visit.user_id, *([f"connection:{visit.connection}"] if visit.connection else [])]
        verdicts = [rate.check(visit.platform, key) for key in keys] if rate is not None else []
        if not all(v.allowed for v in verdicts):
            if any(v.notify for v in verdicts) and rate is not None:
                heard.notices.append(
                    _rate_notice(heard.who, area, clock, visit.platform, rate.per_minute)
                )
            heard.result.limited = True
            return heard
        heard.thread = chat.thread(session, engine.town_id, area, heard.thread_key)
        present = [r for r in residents.values() if World.area_of(r.location) == area]
        heard.result.heard_by = [r.name for r in present]
        named = chat.addressed(words, [r.name for r in present])
        if visit.replying_to in heard.result.heard_by:
            named.insert(0, visit.replying_to)
        heard.addressee = named[0] if named else ""
        heard.answering = [
            chat.Responder(
                r.id or 0, r.name, r.summary, r.location, r.emoji, r.action, dict(r.persona)
            )
            for r in chat.responders(words, present, heard.thread, visit.replying_to)
        ]
        if engine.llm.server_busy():  # a busy server: one answer, and sooner
            heard.answering = heard.answering[:1]
        since = clock - timedelta(minutes=NOTICE_AGAIN_MIN)
        if not heard.answering and not chatlog.told_since(
            session, engine.town_id, area, heard.thread_key, since
        ):
            heard.notices.append(
                _nobody_notice(heard.who, area, clock, visit.platform, asleep=bool(present))
            )
        return heard


async def _answer(
    engine: Engine,
    heard: _Heard,
    resident: chat.Responder,
    typing: Typing | None,
    post: Post | None,
    words: asyncio.Future[None],
) -> tuple[TownEvent, int] | None:
    """One resident's answer: composed outside any lock, stored once the words are, then
    ``post``ed; with the id of its outbox row. None: the visitor was forgotten or muted while
    it was composed, and nothing is stored or posted."""
    event, answer = await _compose(engine, heard, resident, typing)
    await asyncio.shield(words)
    outbox_id = await asyncio.to_thread(_store_answer, engine, heard, event, answer)
    if outbox_id is None:
        return None
    if post is not None:
        await post([outbox_id])
    return event, outbox_id


async def _compose(
    engine: Engine, heard: _Heard, resident: chat.Responder, typing: Typing | None
) -> tuple[TownEvent, Plain]:
    """One resident's answer, composed outside any lock, with nothing written: its event and
    its words as a plain line."""
    area = heard.result.area
    if typing is not None:
        await typing(area, resident.name)
    visitor, words = heard.who, heard.visit.spoken.heard
    with Session(engine.store.engine, expire_on_commit=False) as session:  # reads only
        stream = engine.streams(resident.id)
        recalled = await chat.recall(stream, session, resident, visitor, words, heard.clock)
    # (the session is closed: nothing is held while the resident thinks); words to everyone
    # wait for the model no longer than about a call's time, then the offline brain answers
    everyone = urgency.to_everyone() if not heard.addressee else contextlib.nullcontext()
    with everyone:
        text, made_by = await chat.answer(
            engine.brain, resident, visitor, words, heard.thread, heard.clock, recalled
        )
    data = {"to": heard.who, "reply_to": heard.who, "emoji": resident.emoji, "model": made_by}
    return TownEvent("said", area, heard.clock, resident.name, text, data), text


def _write(engine: Engine, heard: _Heard) -> None:
    """``_store``, once more if a message of the same new visitor (from another process, say)
    stored the visitor first."""
    try:
        _store(engine, heard)
    except IntegrityError:
        _store(engine, heard)


def _store(engine: Engine, heard: _Heard) -> None:
    """The write of a visitor's words: the visitor, the words as a chat line, the audit row,
    the notices (outbox events; the "nobody here" one a chat line too)."""
    area, clock, visit, town_id = heard.result.area, heard.clock, heard.visit, engine.town_id
    limited = heard.result.limited
    # checked by the engine's guard (a worker's lease) like a tick; the town's revision is
    # left alone: nothing a tick reads is written
    with engine.unit(changes_town=False) as session:
        if not heard.new_visitor and not consent.hold_member(
            session, town_id, visit.platform, visit.user_id
        ):
            return  # forgotten since the words were heard: nothing of them is written
        if heard.new_visitor:
            remember_visitor(session, town_id, visit.platform, visit.user_id, heard.who, heard.role)
        logged_as = audit.identity(heard.who, visit.platform, visit.user_id)
        kind = audit.LIMITED if limited else audit.SAY
        audit.record(
            session,
            town_id,
            audit.IN,
            kind,
            logged_as,
            visit.spoken.said,
            game_time=clock,
            platform=visit.platform,
            channel=area,
        )
        line = (session, town_id, area)
        chatlog.add_line(
            *line,
            heard.who,
            chatlog.VISITOR,
            heard.thread_key,
            visit.spoken.heard,
            clock,
            addressee=name_of(heard.addressee),
            platform=visit.platform,
            heard=not limited,
        )
        write_outbox(session, town_id, f"notice:{uuid4().hex}", heard.notices)
        for notice in heard.notices:
            if not limited:  # (told lately: a rate notice has its own once a minute)
                told = plain(notice.text)
                chatlog.add_line(*line, name_of(""), chatlog.TOWN, heard.thread_key, told, clock)
    if engine.after_commit:
        engine.after_commit()


def _store_answer(engine: Engine, heard: _Heard, event: TownEvent, answer: Plain) -> int | None:
    """The write of one resident's answer: its outbox event and its chat line. Returns the
    outbox row's id; None, writing nothing, when the visitor is no longer to be answered."""
    visit = heard.visit
    with engine.unit(changes_town=False) as session:
        if not consent.still_heard(session, engine.town_id, visit.platform, visit.user_id):
            return None
        (row,) = write_outbox(session, engine.town_id, f"say:{uuid4().hex}", [event])
        chatlog.add_line(
            session,
            engine.town_id,
            heard.result.area,
            name_of(event.resident),
            chatlog.RESIDENT,
            heard.thread_key,
            answer,
            heard.clock,
            addressee=heard.who,
            platform=heard.visit.platform,
        )
        session.flush()
        assert row.id is not None
        outbox_id = row.id
    if engine.after_commit:
        engine.after_commit()
    return outbox_id


async def _say_to_place(engine: Engine, area: str, visit: Visit) -> SayResult:
    """Words at a place with a handler (an interview room): the handler answers through one
    resident, thinking from a snapshot with nothing held (``town.inputs.placed``); the others
    there hear the words at their next tick."""
    said = await say_to_place(engine, area, visit)
    result = SayResult(area, heard_by=said.heard_by)
    if said.answer is not None:  # the place's own answer (a mock interview), not small talk
        result.replies.append(said.answer)
    return result


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


def _rate_notice(who: str, area: str, clock: datetime, platform: str, per_minute: int) -> TownEvent:
    """The polite word a visitor gets, once a minute, when writing faster than the town hears."""
    text = (
        f"{who}: you are writing faster than the town can listen (at most {per_minute} "
        "messages a minute), so nobody here heard your last words. Please wait a moment."
    )
    return TownEvent("notice", area, clock, "", text, {"to": who, "for_platform": platform})

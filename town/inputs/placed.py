"""Words at a place with a handler of its own (an interview room): thought about as a tick
thinks, with nothing held while the handler's LLM call runs.

1. One short read: the town, its residents and what the handler reads of them (a ``Tick`` over
   a snapshot, as ``Engine.tick`` reads one), the visitor's row. The read ends.
2. The handler answers (``Store.thinking``: any SQL now raises), holding no lock, connection or
   transaction; what it records waits in the session with ids made in Python.
3. One short write under the engine's lock: the residents the handler changed, the others'
   hearing of the words (pending inputs, taken in at their next tick), the visitor's row, the
   audit row, the chat line and the outbox events.

A tick that committed while the handler thought is kept: the resident's row is read again and
only what the handler changed goes on top (its candidate's record, its busy reaction, its
action), as ``set`` writes an object's row over a tick. The write raises the town's revision, so
a tick still thinking, which read the row before, rolls back rather than write over it
(``Engine.as_input``). Two messages of one candidate answered at once: the later write keeps its
record of the candidate (both answers are memories and chat lines).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from uuid import uuid4

from sqlmodel import Session

from town.inputs.handlers import place_handlers
from town.inputs.joining import known_visitor, marked, quoted, remember_visitor
from town.inputs.naming import visitor_name
from town.inputs.unit import think_apart
from town.inputs.visit import Visit
from town.outbox import audit, chatlog
from town.outbox.events import TownEvent, write_outbox
from town.store.models import PendingInput
from town.tick.engine import OBSERVED, Engine
from town.tick.state import ResidentState
from town.tick.turn import Tick
from town.world.places import World


@dataclass
class PlaceAnswer:
    heard_by: list[str]  # the residents at the place
    answer: TownEvent | None  # the place's own answer (None: it is an ordinary place now)


@dataclass
class _Read:
    """What the handler thinks from: a tick over the snapshot, and who spoke."""

    tick: Tick
    who: str
    role: str
    new_visitor: bool
    emojis: dict[str, str]  # each resident's emoji as read (``Tick.start`` has the rest)


async def say_to_place(engine: Engine, area: str, visit: Visit) -> PlaceAnswer:
    """The handler of ``area`` answers ``visit`` (``think_apart``); the others there hear the
    words (quoted, as any visitor's) at their next tick."""
    handler = place_handlers(engine)[area.casefold()]

    def read(session: Session) -> _Read:
        return _read(engine, session, visit)

    async def think(read: _Read) -> PlaceAnswer:
        said = replace(visit, area=area, name=read.who, role=read.role)
        return PlaceAnswer(_present(read, area), await handler(read.tick, said))

    def write(session: Session, read: _Read, said: PlaceAnswer) -> None:
        town_id, tick, answer = engine.town_id, read.tick, said.answer
        _write_on_top(session, read)
        words = quoted(read.who, read.role, visit.words)
        for name in said.heard_by:
            if answer is None or name != answer.resident:
                session.add(PendingInput(town_id=town_id, resident=name, kind=OBSERVED, text=words))
        if read.new_visitor:
            remember_visitor(session, town_id, visit.platform, visit.user_id, read.who, read.role)
        _record(session, town_id, area, tick.now, read.who, visit)
        write_outbox(session, town_id, f"say:{uuid4().hex}", tick.events)

    return await think_apart(engine, read, think, write)


def _present(read: _Read, area: str) -> list[str]:
    """The residents at ``area`` as the snapshot read them."""
    return [n for n, r in read.tick.residents.items() if World.area_of(r.location) == area]


def _read(engine: Engine, session: Session, visit: Visit) -> _Read:
    """The snapshot: a tick at the town's clock, and the visitor as known or as new."""
    tick = engine.new_tick(session, engine.town(session).clock)
    residents = tick.residents
    known = known_visitor(session, engine.town_id, visit.platform, visit.user_id)
    emojis = {name: row.emoji for name, row in residents.items()}
    if known is not None and not visit.role:  # a visitor who joined keeps name and role
        who = visitor_name(known.display_name, residents)
        return _Read(tick, who, known.role, False, emojis)
    return _Read(tick, marked(visit.name, residents), visit.role, True, emojis)


def _write_on_top(session: Session, read: _Read) -> None:
    """The residents the handler changed, as committed now with its changes on top."""
    tick = read.tick
    for name, thought in tick.states.items():
        row = tick.residents[name]
        action, emoji = row.action, row.emoji
        was = ResidentState.of(row)  # (the row's state as read: the handler changed its copy)
        session.refresh(row)  # what a tick committed meanwhile
        if on_top(ResidentState.of(row), was, thought).save(row):
            session.add(row)
        if action != tick.start[name][1]:
            row.action = action
        if emoji != read.emojis[name]:
            row.emoji = emoji


def on_top(now: ResidentState, was: ResidentState, thought: ResidentState) -> ResidentState:
    """``now`` with what changed from ``was`` to ``thought`` put over it: whole fields, and
    candidate by candidate in ``coaching``."""
    changed = {k: v for k, v in thought if getattr(was, k) != v and k != "coaching"}
    coaching = {k: c for k, c in thought.coaching.items() if was.coaching.get(k) != c}
    return now.model_copy(update={**changed, "coaching": {**now.coaching, **coaching}})


def _record(
    session: Session, town_id: int, area: str, clock: datetime, who: str, visit: Visit
) -> None:
    """The audit row and the chat line (for the record and the pages: heard as a pending
    input, not again from the chat lines)."""
    logged_as = audit.identity(who, visit.platform, visit.user_id)
    audit.record(
        session,
        town_id,
        audit.IN,
        "say:place",
        logged_as,
        visit.words,
        game_time=clock,
        platform=visit.platform,
        channel=area,
    )
    thread = chatlog.thread_of(visit.platform, visit.user_id)
    chatlog.add_line(
        session,
        town_id,
        area,
        who,
        chatlog.VISITOR,
        thread,
        visit.words,
        clock,
        platform=visit.platform,
        heard=False,
    )

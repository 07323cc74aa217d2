"""Words at a place with a handler of its own (an interview room): thought about as a tick
thinks, with nothing held while the handler's LLM call runs.

1. One short read: the town, its residents (with the changes still pending on top) and what the
   handler reads of them (a ``Tick`` over a snapshot, as ``Engine.tick`` reads one), the
   visitor's row. The read ends.
2. The handler answers (``Store.thinking``: any SQL now raises), holding no lock, connection or
   transaction; what it records waits in the session with ids made in Python.
3. One short write under the engine's lock, raising no revision: what the handler changed of
   the residents and the others' hearing of the words (pending inputs, taken in at their next
   tick), the visitor's row, the audit row, the chat line and the outbox events.

What the handler changed of a resident (its state's record of the candidate, its busy reaction,
its action and emoji) is not written on the resident's row: it goes as a pending change
(``town/tick/pending.py``, kind ``changed``), put on the row by the next tick that reads it, and
the town's revision is left alone, so a tick thinking meanwhile commits and never thinks again.
The handler's snapshot is the row with the changes still pending on top, in order, so a
candidate's next words, before any tick took the last ones in, meet the record they left. Two
messages of one candidate answered at once: the later change keeps its record of the candidate
(both answers are memories and chat lines).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from uuid import uuid4

from sqlmodel import Session

from town.inputs.handlers import place_handlers
from town.inputs.joining import known_name, known_visitor, marked, remember_visitor
from town.inputs.unit import think_apart
from town.inputs.visit import Visit
from town.outbox import audit, chatlog
from town.outbox.events import TownEvent, write_outbox
from town.store.models import PendingInput
from town.text import ROLE_LIMIT, Name, Plain, plain
from town.tick.engine import Engine
from town.tick.pending import CHANGED, OBSERVED, Change, changes_on_top
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
    who: Name
    role: Plain
    new_visitor: bool
    # each resident as read (the row with the changes pending on top): its state and emoji
    # (``Tick.start`` has its action)
    was: dict[str, ResidentState] = field(default_factory=dict)
    emojis: dict[str, str] = field(default_factory=dict)


async def say_to_place(engine: Engine, area: str, visit: Visit) -> PlaceAnswer:
    """The handler of ``area`` answers ``visit`` (``think_apart``); the others there hear the
    words (quoted, as any visitor's) at their next tick."""
    handler = place_handlers(engine)[area.casefold()]

    def read(session: Session) -> _Read:
        return _read(engine, session, visit)

    async def think(read: _Read) -> PlaceAnswer:
        named = replace(visit.spoken, name=read.who)
        said = replace(visit, area=area, spoken=named, role=read.role)
        return PlaceAnswer(_present(read, area), await handler(read.tick, said))

    def write(session: Session, read: _Read, said: PlaceAnswer) -> None:
        town_id, tick, answer = engine.town_id, read.tick, said.answer
        _write_changes(session, town_id, read)
        words = chatlog.quoted(read.who, read.role, visit.spoken.heard)
        for name in said.heard_by:
            if answer is None or name != answer.resident:
                session.add(PendingInput(town_id=town_id, resident=name, kind=OBSERVED, text=words))
        if read.new_visitor:
            remember_visitor(session, town_id, visit.platform, visit.user_id, read.who, read.role)
        _record(session, town_id, area, tick.now, read.who, visit)
        write_outbox(session, town_id, f"say:{uuid4().hex}", tick.events)

    return await think_apart(engine, read, think, write, changes_town=False)


def _present(read: _Read, area: str) -> list[str]:
    """The residents at ``area`` as the snapshot read them."""
    return [n for n, r in read.tick.residents.items() if World.area_of(r.location) == area]


def _read(engine: Engine, session: Session, visit: Visit) -> _Read:
    """The snapshot: a tick at the town's clock over the residents with their pending changes on
    top, and the visitor as known or as new."""
    tick = engine.new_tick(session, engine.town(session).clock)
    changes_on_top(tick, engine.town_id)
    residents = tick.residents
    was = {name: tick.state(row).model_copy(deep=True) for name, row in residents.items()}
    emojis = {name: row.emoji for name, row in residents.items()}
    known = known_visitor(session, engine.town_id, visit.platform, visit.user_id)
    if known is not None and not visit.role:  # a visitor who joined keeps name and role
        who = known_name(known, residents)
        return _Read(tick, who, plain(known.role, ROLE_LIMIT), False, was, emojis)
    return _Read(tick, marked(visit.name, residents), visit.role, True, was, emojis)


def _write_changes(session: Session, town_id: int, read: _Read) -> None:
    """What the handler changed of each resident, as a pending change; the residents' rows are
    left as committed (the snapshot's, changed in memory, are put out of the session)."""
    tick = read.tick
    for name, row in tick.residents.items():
        change = Change.between(
            read.was[name],
            tick.state(row),
            action=row.action if row.action != tick.start[name][1] else None,
            emoji=row.emoji if row.emoji != read.emojis[name] else None,
        )
        session.expunge(row)
        if change:
            text = change.model_dump_json()
            session.add(PendingInput(town_id=town_id, resident=name, kind=CHANGED, text=text))


def _record(
    session: Session, town_id: int, area: str, clock: datetime, who: Name, visit: Visit
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
        visit.spoken.said,
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
        visit.spoken.heard,
        clock,
        platform=visit.platform,
        heard=False,
    )

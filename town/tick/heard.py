"""What visitors said and residents answered since the last tick, as the tick takes it in.

A visitor's words are heard without a lock on the town (``town.inputs.visitor``): their audit
row is the record. Each tick reads the rows written since the one before (the residents' states
keep how far they read) and gives every resident present the words as an observation (perceived,
rated and reacted to in this tick's batch; asleep ones on waking), and each resident who
answered a visitor the memory of its answer, staying at the place for the exchange.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func
from sqlmodel import Session, col, select

from town.memory.stream import NewMemory
from town.outbox import audit
from town.store.models import AuditEntry, Resident, Town, Visitor
from town.tick.state import ResidentState
from town.tick.turn import Tick
from town.world.places import World

STAY_MIN = 20  # a resident who answered a visitor stays at the place this many game minutes
CHAT_IMPORTANCE = 4


def take_in(tick: Tick, town_id: int, since: datetime) -> dict[str, list[NewMemory]]:
    """Visitors' words since the last tick into the inboxes of the residents present; returns
    the memories of the answers residents gave (recorded by the tick after its LLM calls, so
    that its write to the store begins late). ``since``: the clock the last tick started from
    (a resident that never read the log takes in the words said from then on)."""
    states = {name: tick.state(row) for name, row in tick.residents.items()}
    if not states:
        return {}
    top = _newest(tick.session, town_id)  # first: a row written meanwhile waits for next tick
    rows = _unread(tick.session, town_id, min(s.heard for s in states.values()), since, top)
    roles = _roles(tick.session, town_id)
    answers: dict[str, list[NewMemory]] = {}
    until = (tick.now + timedelta(minutes=STAY_MIN)).isoformat()
    for row in rows:
        assert row.id is not None
        if row.kind == audit.REPLY:
            state = states.get(row.who)
            if state is not None and row.id > state.heard:
                to, text = audit.reply_parts(row.text)
                memory = f'{row.who} said to {to}: "{text}"'
                answers.setdefault(row.who, []).append(NewMemory("chat", memory, CHAT_IMPORTANCE))
                state.visitor_until = until
            continue
        for resident, (location, _, _) in tick.start.items():
            state = states[resident]
            if World.area_of(location) == row.channel and row.id > state.heard:
                state.inbox.append(_quoted(row, roles))
    for state in states.values():
        state.heard = max(state.heard, top)
    return answers


def waiting(session: Session, town_id: int, resident: Resident) -> list[str]:
    """The visitors' words the resident will take in at the next tick (said where it is)."""
    town = session.get(Town, town_id)
    if town is None:
        return []
    heard = ResidentState.of(resident).heard
    since = town.clock - timedelta(minutes=town.minutes_per_tick)
    rows = _unread(session, town_id, heard, since, _newest(session, town_id))
    roles = _roles(session, town_id)
    area = World.area_of(resident.location)
    return [
        _quoted(r, roles)
        for r in rows
        if r.kind == audit.SAY and r.channel == area and (r.id or 0) > heard
    ]


def _unread(
    session: Session, town_id: int, upto: int, since: datetime, top: int
) -> list[AuditEntry]:
    """Visitors' words and residents' answers to them after row ``upto`` (0: none read yet,
    so those at the clock ``since`` or later), up to row ``top``."""
    query = select(AuditEntry).where(
        AuditEntry.town_id == town_id,
        col(AuditEntry.kind).in_([audit.SAY, audit.REPLY]),
        col(AuditEntry.id) <= top,
    )
    if upto:
        query = query.where(col(AuditEntry.id) > upto)
    else:
        query = query.where(col(AuditEntry.game_time) >= since)
    return list(session.exec(query.order_by(col(AuditEntry.id))).all())


def _quoted(row: AuditEntry, roles: dict[str, str]) -> str:
    """A visitor's words as residents perceive them: a quotation, never an instruction."""
    role = roles.get(row.who, "")
    return f'{audit.name_of(row.who)}{f" ({role})" if role else ""} said: "{row.text}"'


def _newest(session: Session, town_id: int) -> int:
    found = session.exec(select(func.max(AuditEntry.id)).where(AuditEntry.town_id == town_id)).one()
    return int(found or 0)


def _roles(session: Session, town_id: int) -> dict[str, str]:
    """Each visitor's role, by how the audit log names them."""
    rows = session.exec(select(Visitor).where(Visitor.town_id == town_id, Visitor.role != "")).all()
    return {audit.identity(v.display_name, v.platform, v.platform_user_id): v.role for v in rows}

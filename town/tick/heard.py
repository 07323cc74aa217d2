"""What visitors said and residents answered since the last tick, as the tick takes it in.

A visitor's words are heard without a lock on the town (``town.inputs.visitor``): their chat
line is the record (``town.outbox.chatlog``). Each tick reads the lines written since the one
before (the residents' states keep how far they read) and gives every resident present the
words as an observation (perceived, rated and reacted to in this tick's batch; asleep ones on
waking), and each resident who answered a visitor the memory of its answer, staying at the
place for the exchange. The lines hold the words as residents perceive them: no mention
syntax, no mass ping.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlmodel import Session, select

from town.memory.stream import NewMemory
from town.outbox import chatlog
from town.store.models import ChatLine, Resident, Town, Visitor
from town.tick.state import ResidentState
from town.tick.turn import Tick
from town.world.places import World

STAY_MIN = 20  # a resident who answered a visitor stays at the place this many game minutes
CHAT_IMPORTANCE = 4


def take_in(tick: Tick, town_id: int, since: datetime) -> dict[str, list[NewMemory]]:
    """Visitors' words since the last tick into the inboxes of the residents present; returns
    the memories of the answers residents gave (for the tick to record). ``since``: the clock
    the last tick started from (a resident that never read the lines takes in the words said
    from then on)."""
    states = {name: tick.state(row) for name, row in tick.residents.items()}
    if not states:
        return {}
    top = chatlog.newest(tick.session, town_id)  # first: a line written meanwhile waits
    after = min(s.heard for s in states.values())
    lines = chatlog.unheard(tick.session, town_id, after, since, top)
    roles = _roles(tick.session, town_id)
    answers: dict[str, list[NewMemory]] = {}
    until = (tick.now + timedelta(minutes=STAY_MIN)).isoformat()
    for line in lines:
        assert line.id is not None
        if line.kind == chatlog.RESIDENT:
            state = states.get(line.speaker)
            if state is not None and line.id > state.heard:
                memory = f'{line.speaker} said to {line.addressee}: "{line.text}"'
                answers.setdefault(line.speaker, []).append(
                    NewMemory("chat", memory, CHAT_IMPORTANCE)
                )
                state.visitor_until = until
            continue
        for resident, (location, _, _) in tick.start.items():
            state = states[resident]
            if World.area_of(location) == line.area and line.id > state.heard:
                state.inbox.append(_quoted(line, roles))
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
    lines = chatlog.unheard(session, town_id, heard, since, chatlog.newest(session, town_id))
    roles = _roles(session, town_id)
    area = World.area_of(resident.location)
    return [
        _quoted(line, roles)
        for line in lines
        if line.kind == chatlog.VISITOR and line.area == area and (line.id or 0) > heard
    ]


def _quoted(line: ChatLine, roles: dict[str, str]) -> str:
    """A visitor's words as residents perceive them: a quotation, never an instruction."""
    return chatlog.quoted(line.speaker, roles.get(line.thread, ""), line.text)


def _roles(session: Session, town_id: int) -> dict[str, str]:
    """Each visitor's role (mention syntax taken out), by the key of its chats."""
    rows = session.exec(select(Visitor).where(Visitor.town_id == town_id, Visitor.role != "")).all()
    return {chatlog.thread_of(v.platform, v.platform_user_id): v.role for v in rows}

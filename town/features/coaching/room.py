"""An interview room: the place handler that turns a visitor's words there into the
interviewer's turn, and ``plug_in``, which gives a town's interview rooms that handler."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from town.features.coaching import session
from town.features.coaching.briefing import Interviewee
from town.features.coaching.interviews import Interviews, load_interviews
from town.inputs.handlers import Visit, handle_place, place_handlers
from town.outbox.events import TownEvent
from town.text import plain
from town.tick.engine import Engine
from town.tick.turn import Tick
from town.world.places import World


@dataclass(frozen=True)
class InterviewRoom:
    """The handler of a town's interview rooms (a ``town.inputs.handlers.PlaceHandler``)."""

    interviews: Interviews

    async def __call__(self, tick: Tick, visit: Visit) -> TownEvent | None:
        """The interviewer's turn of the mock interview, when it is in its room and awake."""
        spec = self.interviews.interviewer_in(visit.area)
        row = tick.residents.get(spec.resident) if spec is not None else None
        if spec is None or row is None or World.area_of(row.location) != visit.area:
            return None
        if not tick.state(row).awake:
            return None
        key = session.candidate_key(visit.platform, visit.user_id or visit.name)
        visitor = Interviewee(key, visit.name, visit.role)
        text = plain(await session.turn(tick, row, spec, visitor, visit.spoken.heard), 3000)
        tick.emit("said", row, text, to=visit.name, emoji=row.emoji)
        return tick.events[-1]


def plug_in(engine: Engine, folder: str | Path) -> Interviews:
    """Read the interviewers of the town folder the engine's town was made from, and give each
    interview room the handler; a town without ``interviews.toml`` gets none."""
    interviews = load_interviews(folder, engine.spec)
    room = InterviewRoom(interviews)
    for spec in interviews.interviewers:
        handle_place(engine, spec.room, room)
    return interviews


def interviews_of(engine: Engine) -> Interviews:
    """The interviewers plugged into the engine's town (none if no room has the handler)."""
    for handler in place_handlers(engine).values():
        if isinstance(handler, InterviewRoom):
            return handler.interviews
    return Interviews()

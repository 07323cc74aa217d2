"""``feedback``: an interviewer's concrete points on a candidate's mock-interview answers, each
quoting one of them (the ``coach_feedback`` task), thought from a snapshot with nothing held
(``town.inputs.unit.think_apart``)."""

from __future__ import annotations

from sqlmodel import Session

from town.features.coaching import schemas as s
from town.features.coaching.briefing import reviewed, texts
from town.features.coaching.interviews import InterviewerSpec
from town.features.coaching.room import interviews_of
from town.features.coaching.session import candidate_key, first_name
from town.features.coaching.tasks import COACH_FEEDBACK
from town.inputs.unit import UnknownResident, think_apart
from town.memory.stream import NewMemory
from town.store.models import Resident
from town.text import echoed, name_of
from town.tick.engine import Engine
from town.tick.pending import changes_on_top
from town.tick.turn import Tick

FEEDBACK_ANSWERS = 12  # the latest answers the feedback looks at


async def feedback(
    engine: Engine,
    platform: str,
    user_id: str,
    name: str,
    *,
    interviewer: str = "",
    location: str = "",
) -> str:
    """An interviewer's concrete feedback on the visitor's mock-interview answers, quoting them:
    the interviewer named, else the one whose interview room ``location`` is."""
    interviews = interviews_of(engine)
    if not interviews.interviewers:
        raise ValueError(
            "this town has no interviewers: feedback is for towns with interview rooms, "
            "such as interview-practice"
        )
    names = ", ".join(i.resident for i in interviews.interviewers)
    if interviewer:
        try:
            found = interviews.interviewer(interviewer)
        except KeyError:
            message = f"no interviewer named {echoed(interviewer)!r}; interviewers: {names}"
            raise UnknownResident(message) from None
    else:
        chosen = interviews.interviewer_in(location)
        if chosen is None:
            raise ValueError(f"name an interviewer ({names}), or ask in an interview room")
        found = chosen
    key = candidate_key(platform, user_id or name_of(name))

    def read(session: Session) -> tuple[Tick, Resident]:
        tick = engine.new_tick(session, engine.town(session).clock)
        changes_on_top(tick, engine.town_id)  # (the record as the room left it)
        row = tick.residents.get(found.resident)
        if row is None:
            raise UnknownResident(f"{found.resident} does not live in this town")
        return tick, row

    async def think(read: tuple[Tick, Resident]) -> str:
        return await _points(*read, found, key)

    def write(session: Session, snapshot: tuple[Tick, Resident], _points: str) -> None:
        """Nothing more: the memory of the feedback waits in the session (a memory row only:
        the town's revision is left alone; the snapshot's rows, with the pending changes put
        on them in memory, are put out of the session unwritten)."""
        for row in snapshot[0].residents.values():
            session.expunge(row)

    return await think_apart(engine, read, think, write, changes_town=False)


async def _points(tick: Tick, resident: Resident, spec: InterviewerSpec, key: str) -> str:
    """Concrete points on the candidate's latest answers, each quoting one of them."""
    record = tick.state(resident).coaching.get(key)
    answers = reviewed(tick, resident, record.answers[-FEEDBACK_ANSWERS:]) if record else []
    if record is None or not answers:
        return (
            f"{first_name(resident.name)} has no answers of yours yet: say hello in {spec.room} "
            "to start a mock interview."
        )
    result = await tick.brain.run(
        COACH_FEEDBACK,
        s.CoachFeedbackInput(
            interviewer=resident.name,
            role=spec.role,
            candidate=record.name,
            answers=answers,
            reviews=texts(tick, resident, record.reviews[-6:]),
            focus=record.focus,
        ),
        resident=resident.name,
    )
    by_id = {a.id: a for a in answers}
    sessions = len({a.session for a in answers})
    lines = [
        f"Feedback from {resident.name} ({spec.role}) on {_counted(len(answers), 'answer')} "
        f"of yours ({_counted(sessions, 'session')}):"
    ]
    for n, point in enumerate(result.points, 1):
        answer = by_id[point.answer_id]
        lines.append(
            f"{n}. You said “{point.quote}” (session {answer.session}, {answer.topic}): "
            f"{point.advice}"
        )
    if record.focus:
        lines.append(f"Next session's focus: {', '.join(record.focus)}.")
    await tick.stream(resident).record(
        tick.session,
        [NewMemory("chat", f"{resident.name} gave {record.name} feedback: {lines[1]}", 3)],
        tick.now,
    )
    return "\n".join(lines)


def _counted(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"

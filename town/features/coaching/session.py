"""Mock interviews: an interviewer resident rehearses a job interview with a visitor.

Who interviews, in which room, for which company and role, with which bank of questions, is
persona data (``interviews.toml``, see town/persona.py). When a visitor speaks in an interview
room while its interviewer is there (``inputs.mock_interview``), the interviewer takes a turn
(``turn``), instead of small talk:

1. The first words open a session (``Candidate.session``): a greeting and the first question.
   A later session starts from the plan made after the last one: its focus topics come first in
   the bank handed to the model, and the earlier answer it builds on is given too.
2. Each message after that is judged by one ``coach_turn`` call: an answer (stored as a memory
   of the interviewer, tied to the visitor's key ``platform:user id``), or a question to the
   interviewer (answered, and the question asked again). A thin answer gets one follow-up;
   otherwise the next question. One question at a time (the task's check enforces it).
3. After ``questions_per_session`` main questions, or once ``session_minutes`` of game time have
   passed, the session closes: a ``coach_review`` call names strengths and weak spots citing the
   answers' memory ids (stored as reflection memories) and plans the next session's focus
   (a plan memory, and ``Candidate.focus`` / ``start_from`` for the next opening); the
   interviewer says a closing summary and what comes next.

``feedback`` gives the candidate concrete points (``coach_feedback``), each quoting one of their
answers. Everything a session needs is in the interviewer's ``ResidentState.coaching`` (JSON on
its row) and its memories, so a restarted town resumes a session where it stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import col, select

from town.llm import schemas as s
from town.llm.tasks import COACH_FEEDBACK, COACH_REVIEW, COACH_TURN
from town.memory.stream import NewMemory, clean_text
from town.store.models import Memory, Resident
from town.tick.state import AnswerNote, Candidate, CoachingSession, CoachingTurn, ResidentState
from town.tick.turn import Tick
from town.world.persona import InterviewerSpec, InterviewQuestion

KEEP_ANSWERS = 24  # answer notes kept per candidate; older answers live on in memories
FEEDBACK_ANSWERS = 12  # the latest answers the feedback looks at
BANK_SHOWN = 8  # questions handed to the model for the next one
TRANSCRIPT_TURNS = 12
BUSY = "running a mock interview with"


@dataclass(frozen=True)
class Interviewee:
    """The candidate: a visitor's key (``platform:user id``), display name and own words."""

    key: str
    name: str
    about: str = ""


def candidate_key(platform: str, user_id: str) -> str:
    """The key a candidate is remembered by; the shell's ``say`` and ``cmd`` are one place."""
    place = "cli" if platform in ("cli", "shell") else platform
    return f"{place}:{user_id}"[:120]


async def turn(
    tick: Tick, resident: Resident, spec: InterviewerSpec, visitor: Interviewee, words: str
) -> str:
    """The interviewer's answer to the candidate's ``words``: a question, or the closing."""
    state = tick.state(resident)
    other = _busy_with(state, visitor.key, tick.now)
    if other is not None and other.session is not None:
        until = datetime.fromisoformat(other.session.ends)
        return (
            f"I'm in a session with {other.name} until {until:%H:%M}, {_first(visitor.name)}. "
            "Please come back then: I'll be free."
        )
    record = state.coaching.setdefault(visitor.key, Candidate(name=visitor.name))
    record.name = visitor.name
    session = record.session
    if session is not None and tick.now >= _at(session.ends) + _minutes(spec):
        await _close(tick, resident, spec, record)  # left long ago: reviewed quietly
    if record.session is None:
        return await _open(tick, resident, spec, record, visitor, words)
    return await _answer(tick, resident, spec, record, visitor, words)


async def feedback(tick: Tick, resident: Resident, spec: InterviewerSpec, key: str) -> str:
    """Concrete points on the candidate's latest answers, each quoting one of them."""
    record = tick.state(resident).coaching.get(key)
    answers = _reviewed(tick, record.answers[-FEEDBACK_ANSWERS:]) if record else []
    if record is None or not answers:
        return (
            f"{_first(resident.name)} has no answers of yours yet: say hello in {spec.room} "
            "to start a mock interview."
        )
    result = await tick.brain.run(
        COACH_FEEDBACK,
        s.CoachFeedbackInput(
            interviewer=resident.name,
            role=spec.role,
            candidate=record.name,
            answers=answers,
            reviews=_texts(tick, record.reviews[-6:]),
            focus=record.focus,
        ),
        resident=resident.name,
    )
    by_id = {a.id: a for a in answers}
    sessions = len({a.session for a in answers})
    lines = [
        f"Feedback from {resident.name} ({spec.role}) on {_count(len(answers), 'answer')} "
        f"of yours ({_count(sessions, 'session')}):"
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


# -- a session ------------------------------------------------------------------------------


async def _open(
    tick: Tick,
    resident: Resident,
    spec: InterviewerSpec,
    record: Candidate,
    visitor: Interviewee,
    words: str,
) -> str:
    session = CoachingSession(
        number=record.sessions + 1,
        started=tick.now.isoformat(),
        ends=(tick.now + _minutes(spec)).isoformat(),
        focus=list(record.focus),
    )
    record.session = session
    result = await _think(tick, resident, spec, record, visitor, words, may_follow_up=False)
    await _remember(
        tick,
        resident,
        f"{visitor.name} came to {spec.room} for mock interview {session.number} "
        f"with {resident.name}",
        5,
    )
    await _ask(tick, resident, spec, record, result, follow_up=False)
    state = tick.state(resident)
    state.reaction = f"{BUSY} {visitor.name}"
    state.reaction_until, state.item = session.ends, None
    resident.action, resident.emoji = state.reaction, "🎤"
    tick.emit("action", resident, f"{resident.name} is {state.reaction}", emoji="🎤")
    return _join(result.reply, result.text)


async def _answer(
    tick: Tick,
    resident: Resident,
    spec: InterviewerSpec,
    record: Candidate,
    visitor: Interviewee,
    words: str,
) -> str:
    session = record.session
    assert session is not None
    current = session.turns[-1]
    time_up = tick.now >= _at(session.ends)
    may_follow_up = not current.follow_up and not time_up
    result = await _think(tick, resident, spec, record, visitor, words, may_follow_up)
    if result.answered:
        await _record_answer(tick, resident, record, session, current, words)
    done = result.answered and not result.follow_up
    if time_up or (done and session.main_questions() >= spec.questions_per_session):
        closing = await _close(tick, resident, spec, record)
        return _join(result.reply, closing)
    if result.answered:
        await _ask(tick, resident, spec, record, result, follow_up=result.follow_up)
    return _join(result.reply, result.text)


async def _think(
    tick: Tick,
    resident: Resident,
    spec: InterviewerSpec,
    record: Candidate,
    visitor: Interviewee,
    words: str,
    may_follow_up: bool,
) -> s.CoachTurnResult:
    session = record.session
    assert session is not None
    current = session.turns[-1] if session.turns else None
    banked = spec.question(current.question_id) if current and current.question_id else None
    follow_up = banked.follow_up if banked and current and not current.follow_up else ""
    left = int((_at(session.ends) - tick.now).total_seconds() // 60)
    return await tick.brain.run(
        COACH_TURN,
        s.CoachTurnInput(
            interviewer=resident.name,
            company=spec.company,
            role=spec.role,
            about=spec.about,
            candidate=visitor.name,
            candidate_about=visitor.about,
            session=session.number,
            question_number=session.main_questions(),
            questions_total=spec.questions_per_session,
            minutes_left=max(0, left),
            focus=session.focus,
            plan=record.plan if session.number > 1 else "",
            builds_on=_builds_on(tick, record) if session.number > 1 else None,
            earlier=_texts(tick, record.reviews[-4:]),
            bank=[_bank_question(q) for q in _bank(spec, record, session)],
            transcript=_transcript(resident, visitor, session),
            current_question=current.question if current else "",
            current_follow_up=follow_up,
            message=words,
            may_follow_up=may_follow_up and current is not None,
        ),
        resident=resident.name,
    )


async def _ask(
    tick: Tick,
    resident: Resident,
    spec: InterviewerSpec,
    record: Candidate,
    result: s.CoachTurnResult,
    *,
    follow_up: bool,
) -> None:
    """Put the question of ``result`` on the table (and in the interviewer's memory)."""
    session = record.session
    assert session is not None
    previous = session.turns[-1] if session.turns else None
    banked = spec.question(result.question_id) if result.question_id else None
    topic = banked.topic if banked else (previous.topic if previous and follow_up else "")
    session.turns.append(
        CoachingTurn(
            question=_flat(result.text),
            question_id=banked.id if banked else "",
            topic=topic or (session.focus[0] if session.focus else "general"),
            follow_up=follow_up,
        )
    )
    if banked and banked.id not in record.asked:
        record.asked.append(banked.id)
    await _remember(
        tick,
        resident,
        f'{resident.name} asked {record.name} in mock interview {session.number}: "{result.text}"',
        3,
        kind="chat",
    )


async def _record_answer(
    tick: Tick,
    resident: Resident,
    record: Candidate,
    session: CoachingSession,
    current: CoachingTurn,
    words: str,
) -> None:
    question = _flat(current.question)[:300]
    prefix = (
        f"{record.name} answered {resident.name}'s question in mock interview {session.number} "
        f'("{question}"): "'
    )
    answer = _flat(words)
    stored = await tick.stream(resident).record(
        tick.session, [NewMemory("chat", f'{prefix}{answer}"', 5)], tick.now
    )
    memory_id = stored[0].id
    assert memory_id is not None
    current.answer, current.answer_memory = answer, memory_id
    note = AnswerNote(
        memory=memory_id,
        session=session.number,
        topic=current.topic,
        question=question,
        answer_at=len(prefix),
    )
    record.answers = [*record.answers, note][-KEEP_ANSWERS:]


async def _close(tick: Tick, resident: Resident, spec: InterviewerSpec, record: Candidate) -> str:
    """Close the session: review it (reflections, plan) and say the closing words."""
    session = record.session
    assert session is not None
    record.session = None
    state = tick.state(resident)
    if state.reaction.startswith(BUSY):
        state.reaction_until = tick.now.isoformat()  # free again: back to the day plan
    answered = [t for t in session.turns if t.answer_memory is not None]
    if not answered:
        return (
            f"We're out of time for today, {_first(record.name)}. Come back to {spec.room} "
            "whenever you're ready to start again."
        )
    minutes = int((tick.now - _at(session.started)).total_seconds() // 60)
    review = await tick.brain.run(
        COACH_REVIEW,
        s.CoachReviewInput(
            interviewer=resident.name,
            company=spec.company,
            role=spec.role,
            candidate=record.name,
            session=session.number,
            focus=session.focus,
            topics=spec.topics(),
            answers=[_as_reviewed(session.number, t) for t in answered],
            minutes=max(0, minutes),
            next_steps=spec.next_steps,
        ),
        resident=resident.name,
    )
    about = f"{resident.name}'s review of {record.name} after mock interview {session.number}"
    insights = [
        NewMemory("reflection", f"{about}: a strength: {i.text}", 6, cites=i.cites)
        for i in review.strengths
    ] + [
        NewMemory("reflection", f"{about}: to work on: {i.text}", 7, cites=i.cites)
        for i in review.weak_spots
    ]
    plan = NewMemory(
        "plan",
        f"{resident.name}'s plan for {record.name}'s next mock interview: focus on "
        f"{', '.join(review.focus)}. {review.plan}",
        6,
    )
    stored = await tick.stream(resident).record(tick.session, [*insights, plan], tick.now)
    record.reviews = [*record.reviews, *(m.id for m in stored[:-1] if m.id is not None)][-12:]
    record.sessions += 1
    record.focus, record.plan = list(review.focus), review.plan
    record.start_from = review.start_from
    tick.emit(
        "reflected",
        resident,
        f"{resident.name} reviewed {record.name}'s mock interview",
        insights=[m.text for m in stored],
    )
    return review.closing


# -- what the model is shown ------------------------------------------------------------------


def _bank(
    spec: InterviewerSpec, record: Candidate, session: CoachingSession
) -> list[InterviewQuestion]:
    """Questions not asked yet (if none are left: not asked this session), the planned focus
    first, then topics not yet covered in this session, in the bank's order."""
    in_session = {t.question_id for t in session.turns}
    fresh = [q for q in spec.questions if q.id not in record.asked]
    pool = fresh or [q for q in spec.questions if q.id not in in_session]
    focus = [f.casefold() for f in session.focus]
    covered = {t.topic.casefold() for t in session.turns}

    def rank(question: InterviewQuestion) -> tuple[int, int]:
        topic = question.topic.casefold()
        if topic in focus:
            return 0, focus.index(topic)
        return (1 if topic not in covered else 2), 0

    return sorted(pool, key=rank)[:BANK_SHOWN]


def _bank_question(question: InterviewQuestion) -> s.BankQuestion:
    return s.BankQuestion(
        id=question.id, topic=question.topic, text=question.text, follow_up=question.follow_up
    )


def _transcript(
    resident: Resident, visitor: Interviewee, session: CoachingSession
) -> list[s.Utterance]:
    said: list[s.Utterance] = []
    for asked in session.turns:
        said.append(s.Utterance(speaker=resident.name, text=asked.question))
        if asked.answer:
            said.append(s.Utterance(speaker=visitor.name, text=asked.answer))
    return said[-TRANSCRIPT_TURNS:]


def _as_reviewed(number: int, asked: CoachingTurn) -> s.ReviewedAnswer:
    assert asked.answer_memory is not None
    return s.ReviewedAnswer(
        id=asked.answer_memory,
        session=number,
        topic=asked.topic,
        question=asked.question,
        answer=asked.answer,
    )


def _reviewed(tick: Tick, notes: list[AnswerNote]) -> list[s.ReviewedAnswer]:
    """The noted answers, their words read back from the memories that hold them."""
    rows = _memories(tick, [n.memory for n in notes])
    return [
        s.ReviewedAnswer(
            id=n.memory,
            session=n.session,
            topic=n.topic,
            question=n.question,
            answer=rows[n.memory].text[n.answer_at :].removesuffix('"'),
        )
        for n in notes
        if n.memory in rows
    ]


def _builds_on(tick: Tick, record: Candidate) -> s.ReviewedAnswer | None:
    notes = [n for n in record.answers if n.memory == record.start_from]
    found = _reviewed(tick, notes)
    return found[0] if found else None


def _texts(tick: Tick, ids: list[int]) -> list[str]:
    rows = _memories(tick, ids)
    return [rows[i].text for i in ids if i in rows]


def _memories(tick: Tick, ids: list[int]) -> dict[int, Memory]:
    if not ids:
        return {}
    found = tick.session.exec(select(Memory).where(col(Memory.id).in_(ids))).all()
    return {m.id: m for m in found if m.id is not None}


# -- small helpers ----------------------------------------------------------------------------


def _busy_with(state: ResidentState, key: str, now: datetime) -> Candidate | None:
    """Another candidate whose session is running now."""
    for other_key, other in state.coaching.items():
        if other_key != key and other.session is not None and now < _at(other.session.ends):
            return other
    return None


async def _remember(
    tick: Tick, resident: Resident, text: str, importance: int, kind: str = "observation"
) -> None:
    await tick.stream(resident).record(tick.session, [NewMemory(kind, text, importance)], tick.now)


def _minutes(spec: InterviewerSpec) -> timedelta:
    return timedelta(minutes=spec.session_minutes)


def _at(iso: str) -> datetime:
    return datetime.fromisoformat(iso)


def _flat(text: str) -> str:
    """One line, as the memory stream stores it (so offsets into a memory's text hold)."""
    return clean_text(text)


def _first(name: str) -> str:
    return name.split()[0] if name.split() else name


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"


def _join(*parts: str) -> str:
    return " ".join(part.strip() for part in parts if part.strip())

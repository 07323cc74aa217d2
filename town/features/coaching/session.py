"""A mock interview's session: it opens, takes the candidate's answers one question at a time,
and closes with a review (see the package's docstring)."""

from __future__ import annotations

from datetime import datetime, timedelta

from town.features.coaching import briefing
from town.features.coaching import schemas as s
from town.features.coaching.briefing import Interviewee
from town.features.coaching.interviews import InterviewerSpec
from town.features.coaching.tasks import COACH_REVIEW, COACH_TURN
from town.memory.stream import NewMemory, stored_text
from town.store.models import Resident
from town.tick.state import AnswerNote, Candidate, CoachingSession, CoachingTurn, ResidentState
from town.tick.turn import Tick

KEEP_ANSWERS = 24  # answer notes kept per candidate; older answers live on in memories
BUSY = "running a mock interview with"


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
            f"I'm in a session with {other.name} until {until:%H:%M}, {first_name(visitor.name)}. "
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
            builds_on=briefing.builds_on(tick, resident, record) if session.number > 1 else None,
            earlier=briefing.texts(tick, resident, record.reviews[-4:]),
            bank=[briefing.bank_question(q) for q in briefing.bank(spec, record, session)],
            transcript=briefing.transcript(resident, visitor, session),
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
            f"We're out of time for today, {first_name(record.name)}. Come back to {spec.room} "
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
            answers=[briefing.as_reviewed(session.number, t) for t in answered],
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
    return stored_text(text)


def first_name(name: str) -> str:
    return name.split()[0] if name.split() else name


def _join(*parts: str) -> str:
    return " ".join(part.strip() for part in parts if part.strip())

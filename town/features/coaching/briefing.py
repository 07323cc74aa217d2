"""What the interviewer hands the model: the bank of questions left, the transcript, and the
candidate's earlier answers read back from the memories that hold them."""

from __future__ import annotations

from dataclasses import dataclass

from town.features.coaching import schemas as s
from town.features.coaching.interviews import InterviewerSpec, InterviewQuestion
from town.llm.schemas import Utterance
from town.store.models import Resident
from town.tick.state import AnswerNote, Candidate, CoachingSession, CoachingTurn
from town.tick.turn import Tick

BANK_SHOWN = 8  # questions handed to the model for the next one
TRANSCRIPT_TURNS = 12


@dataclass(frozen=True)
class Interviewee:
    """The candidate: a visitor's key (``platform:user id``), display name and own words."""

    key: str
    name: str
    about: str = ""


def bank(
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


def bank_question(question: InterviewQuestion) -> s.BankQuestion:
    return s.BankQuestion(
        id=question.id, topic=question.topic, text=question.text, follow_up=question.follow_up
    )


def transcript(
    resident: Resident, visitor: Interviewee, session: CoachingSession
) -> list[Utterance]:
    said: list[Utterance] = []
    for asked in session.turns:
        said.append(Utterance(speaker=resident.name, text=asked.question))
        if asked.answer:
            said.append(Utterance(speaker=visitor.name, text=asked.answer))
    return said[-TRANSCRIPT_TURNS:]


def as_reviewed(number: int, asked: CoachingTurn) -> s.ReviewedAnswer:
    assert asked.answer_memory is not None
    return s.ReviewedAnswer(
        id=asked.answer_memory,
        session=number,
        topic=asked.topic,
        question=asked.question,
        answer=asked.answer,
    )


def reviewed(tick: Tick, resident: Resident, notes: list[AnswerNote]) -> list[s.ReviewedAnswer]:
    """The noted answers, their words read back from the memories of the interviewer that
    hold them."""
    rows = _memories(tick, resident, [n.memory for n in notes])
    return [
        s.ReviewedAnswer(
            id=n.memory,
            session=n.session,
            topic=n.topic,
            question=n.question,
            answer=rows[n.memory][n.answer_at :].removesuffix('"'),
        )
        for n in notes
        if n.memory in rows
    ]


def builds_on(tick: Tick, resident: Resident, record: Candidate) -> s.ReviewedAnswer | None:
    notes = [n for n in record.answers if n.memory == record.start_from]
    found = reviewed(tick, resident, notes)
    return found[0] if found else None


def texts(tick: Tick, resident: Resident, ids: list[int]) -> list[str]:
    rows = _memories(tick, resident, ids)
    return [rows[i] for i in ids if i in rows]


def _memories(tick: Tick, resident: Resident, ids: list[int]) -> dict[int, str]:
    """The texts of the interviewer's memories ``ids``, from its memory arrays (read with the
    snapshot: nothing is queried while the interviewer thinks)."""
    return tick.stream(resident).arrays.texts_of(ids) if ids else {}

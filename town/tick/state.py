"""What a resident carries from tick to tick beyond its row: kept as JSON in ``Resident.state``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from town.store.models import Resident


class CoachingTurn(BaseModel):
    """One question of a mock interview and the candidate's answer to it (when given)."""

    question: str
    question_id: str = ""  # its id in the interviewer's bank ("" for a question of its own)
    topic: str = ""
    follow_up: bool = False
    answer: str = ""
    answer_memory: int | None = None  # the memory holding the answer


class CoachingSession(BaseModel):
    """A mock interview in progress."""

    number: int  # 1 for the candidate's first session with this interviewer
    started: str  # ISO game time
    ends: str  # ISO game time the session is due to close
    focus: list[str] = Field(default_factory=list)  # topics planned for it after the last one
    turns: list[CoachingTurn] = Field(default_factory=list)

    def main_questions(self) -> int:
        return sum(1 for turn in self.turns if not turn.follow_up)


class AnswerNote(BaseModel):
    """Where one of the candidate's answers is: its memory (the text), and what it answered."""

    memory: int
    session: int
    topic: str
    question: str
    answer_at: int  # the answer's first character in the memory's text


class Candidate(BaseModel):
    """What an interviewer keeps of one candidate (a visitor) from session to session."""

    name: str  # the visitor's display name, as last seen
    sessions: int = 0  # sessions closed
    session: CoachingSession | None = None
    asked: list[str] = Field(default_factory=list)  # bank ids asked in any session
    answers: list[AnswerNote] = Field(default_factory=list)  # the latest, oldest first
    reviews: list[int] = Field(default_factory=list)  # reflection memories on the candidate
    focus: list[str] = Field(default_factory=list)  # topics planned for the next session
    plan: str = ""  # the plan in words (also a plan memory)
    start_from: int | None = None  # the answer (memory id) the next session builds on


class ResidentState(BaseModel):
    awake: bool = False
    day: str = ""  # ISO date of the day plan in force
    sleep_at: str = ""  # ISO game time the resident goes to bed
    item: int | None = None  # the action plan item being carried out
    item_until: str = ""  # ISO game time that item ends
    known: dict[str, str] = Field(default_factory=dict)  # area -> ISO time first seen or entered
    # area -> what the resident saw there last: "@Name" -> "" for each resident present, and
    # "object|<sub-area>|<object>" -> its description for each object not in its usual state
    seen: dict[str, dict[str, str]] = Field(default_factory=dict)
    inbox: list[str] = Field(default_factory=list)  # inputs not yet perceived
    heard: int = 0  # the chat lines read up to this one (visitors' words: town/tick/heard.py)
    visitor_until: str = ""  # ISO game time: talking with a visitor, it stays till then
    since_reflection: int = 0  # summed importance since the last reflection
    talked: dict[str, str] = Field(default_factory=dict)  # name -> ISO time of the last talk
    reaction: str = ""
    reaction_until: str = ""
    directive: str = ""  # inner voice not yet acted on in conversation
    yesterday: str = ""  # how the previous day went, for planning
    # Work carried to the next tick, so that a tick asks at most one LLM call of a resident
    # (see the engine's docstring): the day plan after the summary, a reaction after the rating,
    # an object's new state after the reaction, the steps of a reflection.
    plan_next: bool = False
    noticed: dict[str, str] = Field(default_factory=dict)  # {"key", "text"} to react to
    object_next: dict[str, str] = Field(default_factory=dict)  # {"key", "reaction"}
    talk: int | None = None  # the conversation the resident is in
    talk_memories: list[str] = Field(default_factory=list)  # what it recalls of the other
    reflect_questions: list[str] = Field(default_factory=list)
    reflect_insights: list[dict[str, Any]] = Field(default_factory=list)
    # An interviewer's candidates (town/features/coaching), by visitor key "platform:user id".
    coaching: dict[str, Candidate] = Field(default_factory=dict)

    @classmethod
    def of(cls, resident: Resident) -> ResidentState:
        return cls.model_validate(resident.state or {})

    def save(self, resident: Resident) -> bool:
        """Write the state to the resident's row; False if it had not changed."""
        dumped = self.model_dump(mode="json")
        if dumped == resident.state:
            return False
        resident.state = dumped
        return True

    def talked_recently(self, name: str, now: datetime, cooldown_min: int) -> bool:
        last = self.talked.get(name)
        if not last:
            return False
        return (now - datetime.fromisoformat(last)).total_seconds() < cooldown_min * 60

    def with_visitor(self, now: datetime) -> bool:
        return bool(self.visitor_until) and now < datetime.fromisoformat(self.visitor_until)

    def reacting(self, now: datetime) -> bool:
        return bool(self.reaction_until) and now < datetime.fromisoformat(self.reaction_until)

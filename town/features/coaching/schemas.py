"""The mock interview's task inputs and results (the data its prompts are filled from)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from town.llm.schemas import Insight, Utterance
from town.llm.task import PROSE_LINE, quoted
from town.text import clean_text


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class BankQuestion(_Model):
    """A question of the interviewer's bank (persona data)."""

    id: str
    topic: str
    text: str
    follow_up: str = ""


class ReviewedAnswer(_Model):
    """One of the candidate's answers, as the review and the feedback see it."""

    id: int = Field(description="The answer's memory id: cite it.")
    session: int
    topic: str
    question: str
    answer: str

    def prose(self) -> str:
        return (
            f"[{self.id}] in session {self.session}, "
            f"on {clean_text(self.topic, PROSE_LINE)}: asked "
            f"{quoted(self.question)}, answered {quoted(self.answer)}"
        )


class CoachTurnInput(_Model):
    """The interviewer's next turn: the candidate just said ``message``."""

    interviewer: str
    company: str
    role: str
    about: str = Field(description="What the interviewer knows of the company and the role.")
    candidate: str
    candidate_about: str = Field("", description="What the candidate said of themselves.")
    session: int = Field(ge=1, description="1 for the first session with this candidate.")
    question_number: int = Field(ge=0, description="Main questions asked so far this session.")
    questions_total: int = Field(ge=1)
    minutes_left: int
    focus: list[str] = Field(default_factory=list, description="Topics planned for this session.")
    plan: str = Field("", description="The plan made after the last session.")
    builds_on: ReviewedAnswer | None = Field(
        None, description="The earlier answer the plan says to start from."
    )
    earlier: list[str] = Field(
        default_factory=list, description="What the interviewer concluded about the candidate."
    )
    bank: list[BankQuestion] = Field(
        default_factory=list, description="Questions not asked yet, the preferred first."
    )
    transcript: list[Utterance] = Field(default_factory=list, description="This session so far.")
    current_question: str = Field(description='The question on the table; "" at the opening.')
    current_follow_up: str = Field("", description="The bank's follow-up for it, if any.")
    message: str
    may_follow_up: bool


class CoachTurnResult(_Model):
    answered: bool = Field(description="The message answers the question on the table.")
    reply: str = Field("", description="A short reply to what the candidate said; no question.")
    follow_up: bool = Field(description="``text`` follows up on a thin answer.")
    text: str = Field(min_length=1, description="The one question asked now.")
    question_id: str = Field("", description="The bank id when ``text`` is a bank question.")


class CoachReviewInput(_Model):
    """A closed session, to review: strengths, weak spots, the next session's focus."""

    interviewer: str
    company: str
    role: str
    candidate: str
    session: int = Field(ge=1)
    focus: list[str] = Field(default_factory=list, description="What this session worked on.")
    topics: list[str] = Field(description="The bank's topics, to choose the next focus from.")
    answers: list[ReviewedAnswer] = Field(min_length=1)
    minutes: int = Field(ge=0, description="How long the session took.")
    next_steps: str


class CoachReviewResult(_Model):
    strengths: list[Insight] = Field(default_factory=list, max_length=3)
    weak_spots: list[Insight] = Field(min_length=1, max_length=3)
    focus: list[str] = Field(min_length=1, max_length=3)
    plan: str = Field(min_length=1, description="How the next session starts and why.")
    start_from: int | None = Field(None, description="The answer id the next session builds on.")
    closing: str = Field(min_length=1, description="Said to the candidate: summary, what next.")


class CoachFeedbackInput(_Model):
    """The candidate asked for feedback on their answers."""

    interviewer: str
    role: str
    candidate: str
    answers: list[ReviewedAnswer] = Field(min_length=1)
    reviews: list[str] = Field(default_factory=list)
    focus: list[str] = Field(default_factory=list)


class FeedbackPoint(_Model):
    answer_id: int
    quote: str = Field(min_length=1, description="Words copied exactly from that answer.")
    advice: str = Field(min_length=1)


class CoachFeedbackResult(_Model):
    points: list[FeedbackPoint] = Field(min_length=1, max_length=5)

"""Input and result models of the thinking tasks (the data each prompt is filled from)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from town.text import cut

# Only simple character classes in patterns: a grammar engine (llama.cpp's) cannot take \d.
ClockTime = Annotated[str, Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$", description="HH:MM")]
Importance = Annotated[int, Field(ge=1, le=10)]


# Text a model writes is capped: longer text is cut at a sentence or word boundary (whoever wrote
# it: the model, the offline brain or a test), and the JSON schema says ``maxLength`` so that a
# grammar engine never lets a model write more.


def capped(value: object, limit: int) -> object:
    """A validator's view: text is cut to ``limit`` (stripped first); anything else is left for
    the type check to judge."""
    return cut(value.strip(), limit) if isinstance(value, str) else value


NAME_CAP, LINE_CAP, REMARK_CAP, SPEECH_CAP, PASSAGE_CAP = 80, 200, 300, 500, 1000
Name = Annotated[str, BeforeValidator(lambda v: capped(v, NAME_CAP)), Field(max_length=NAME_CAP)]
Line = Annotated[str, BeforeValidator(lambda v: capped(v, LINE_CAP)), Field(max_length=LINE_CAP)]
Remark = Annotated[
    str, BeforeValidator(lambda v: capped(v, REMARK_CAP)), Field(max_length=REMARK_CAP)
]
Speech = Annotated[
    str, BeforeValidator(lambda v: capped(v, SPEECH_CAP)), Field(max_length=SPEECH_CAP)
]
Passage = Annotated[
    str, BeforeValidator(lambda v: capped(v, PASSAGE_CAP)), Field(max_length=PASSAGE_CAP)
]
Emoji = Annotated[str, BeforeValidator(lambda v: capped(v, 16)), Field(max_length=16)]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


def minutes(clock_time: str) -> int:
    """Minutes since midnight of an ``HH:MM`` time."""
    hours, mins = clock_time.split(":")
    return int(hours) * 60 + int(mins)


def clock(total_minutes: int) -> str:
    """The ``HH:MM`` time of minutes since midnight (past midnight: the next day's)."""
    total = total_minutes % (24 * 60)
    return f"{total // 60:02d}:{total % 60:02d}"


class PlanItem(_Model):
    """One entry of a plan: from `start`, for `duration_min` minutes, at `location`."""

    start: ClockTime
    duration_min: int = Field(ge=1, le=24 * 60)
    location: Name
    description: Line = Field(min_length=1)
    emoji: Emoji = Field("", description="1-3 emoji for an action; may be empty")


class Utterance(_Model):
    speaker: str
    text: str


class NumberedStatement(_Model):
    id: int
    text: str


class Insight(_Model):
    text: Remark = Field(min_length=1)
    cites: list[int] = Field(default_factory=list, max_length=30)
    importance: int = Field(5, ge=1, le=10)  # rated with the insight: no call of its own


# -- rate_importance -------------------------------------------------------------------------


class RateImportanceInput(_Model):
    resident: str
    observations: list[str] = Field(min_length=1)


class RateImportanceResult(_Model):
    scores: list[Importance]


# -- plan_day ------------------------------------------------------------------------------


class PlanDayInput(_Model):
    resident: str
    summary: str
    yesterday: str
    date: str
    wake_time: ClockTime
    routine: list[str] = Field(default_factory=list)
    places: list[str] = Field(default_factory=list)


class PlanDayResult(_Model):
    chunks: list[PlanItem] = Field(min_length=5, max_length=8)


# -- decompose -----------------------------------------------------------------------------


class DecomposeInput(_Model):
    resident: str
    summary: str
    chunk: PlanItem
    granularity: Literal["hour", "action"]
    places: list[str] = Field(default_factory=list)


class DecomposeResult(_Model):
    items: list[PlanItem] = Field(min_length=1)


# -- choose_location -----------------------------------------------------------------------


class ChooseLocationInput(_Model):
    resident: str
    activity: str
    current: str
    tree: list[str] = Field(default_factory=list)


class ChooseLocationResult(_Model):
    path: list[Name] = Field(min_length=1, max_length=6)


# -- react ---------------------------------------------------------------------------------


class ReactInput(_Model):
    resident: str
    current_action: str
    observation: str
    relationship: str
    context: list[str] = Field(default_factory=list)
    present: list[str] = Field(
        default_factory=list,
        description="Whom the resident can talk to: the residents there and awake (talk_to is "
        "one of them or null).",
    )


def present_named(inputs: ReactInput, name: str | None) -> str | None:
    """The one present whom ``name`` names (in its own spelling, whatever the case), or None."""
    wanted = (name or "").strip().casefold()
    return next((p for p in inputs.present if wanted and p.casefold() == wanted), None)


class ReactResult(_Model):
    react: bool
    reaction: Remark
    talk_to: Name | None = None


# -- utter ---------------------------------------------------------------------------------


class UtterInput(_Model):
    speaker: str
    listener: str
    speaker_summary: str
    relationship: str
    memories: list[str] = Field(default_factory=list)
    history: list[Utterance] = Field(default_factory=list)
    location: str
    directive: str | None = None
    visitor: bool = False  # the listener is a visitor (a thread of a chat, not a talk)


class UtterResult(_Model):
    text: Speech = Field(min_length=1)
    end: bool


# -- reflection ----------------------------------------------------------------------------


class ReflectQuestionsInput(_Model):
    resident: str
    statements: list[str] = Field(min_length=1)


class ReflectQuestionsResult(_Model):
    questions: list[Line] = Field(min_length=1, max_length=5)


class QuestionStatements(_Model):
    question: str
    statements: list[NumberedStatement]


class ReflectInsightsInput(_Model):
    resident: str
    questions: list[QuestionStatements] = Field(min_length=1)


class ReflectInsightsResult(_Model):
    insights: list[Insight] = Field(max_length=15)  # up to 5 a question


# -- small tasks ---------------------------------------------------------------------------


class EmojiInput(_Model):
    action: str


class EmojiResult(_Model):
    emoji: Emoji = Field(min_length=1)


class ObjectStateInput(_Model):
    object: str
    state: str
    action: str


class ObjectStateResult(_Model):
    state: Line = Field(min_length=1)


class SummarizeInput(_Model):
    resident: str
    memories: list[str] = Field(default_factory=list)


class SummarizeResult(_Model):
    summary: Passage = Field(min_length=1)


class InterviewInput(_Model):
    resident: str
    summary: str
    memories: list[str] = Field(default_factory=list)
    question: str
    asker: str | None = None


class InterviewResult(_Model):
    answer: Passage = Field(min_length=1)

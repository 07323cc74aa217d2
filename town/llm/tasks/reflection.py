"""The tasks of reflection: questions about recent memories, insights citing them, a summary."""

from __future__ import annotations

from town.llm import schemas as s
from town.llm.offline import social as offline
from town.llm.structured import Schema, prop
from town.llm.task import make_task
from town.llm.urgency import BACKGROUND, PLANNING


def _three_at_most(inputs: s.ReflectQuestionsInput, schema: Schema) -> None:
    prop(schema, "questions")["maxItems"] = 3


def _three_questions(
    inputs: s.ReflectQuestionsInput, result: s.ReflectQuestionsResult
) -> s.ReflectQuestionsResult:
    questions = [q.strip() for q in result.questions if q.strip()]
    if not questions:
        raise ValueError("no question given")
    return s.ReflectQuestionsResult(questions=questions[:3])


REFLECT_QUESTIONS = make_task(
    "reflect_questions",
    s.ReflectQuestionsInput,
    s.ReflectQuestionsResult,
    "You help a resident reflect on recent experience.",
    _three_questions,
    offline=offline.reflect_questions,
    shaper=_three_at_most,
    urgency=BACKGROUND,
    words="reflections",
)


def _cites_given(inputs: s.ReflectInsightsInput, schema: Schema) -> None:
    insights = prop(schema, "insights")
    insights["maxItems"] = min(15, 5 * len(inputs.questions))
    ids = sorted({st.id for group in inputs.questions for st in group.statements})
    cites = insights["items"]["properties"]["cites"]
    cites["items"] = {"type": "integer", "enum": ids} if ids else {"type": "integer"}
    cites["maxItems"] = min(len(ids), 30) if ids else 0


def _known_cites(
    inputs: s.ReflectInsightsInput, result: s.ReflectInsightsResult
) -> s.ReflectInsightsResult:
    """Drop cites of statements that were not in the input."""
    ids = {statement.id for group in inputs.questions for statement in group.statements}
    insights = [
        insight.model_copy(update={"cites": [c for c in dict.fromkeys(insight.cites) if c in ids]})
        for insight in result.insights
    ]
    return s.ReflectInsightsResult(insights=insights)


REFLECT_INSIGHTS = make_task(
    "reflect_insights",
    s.ReflectInsightsInput,
    s.ReflectInsightsResult,
    "You draw high-level insights from a resident's memories, citing them.",
    _known_cites,
    offline=offline.reflect_insights,
    shaper=_cites_given,
    urgency=BACKGROUND,
    words="reflections",
)
SUMMARIZE = make_task(
    "summarize",
    s.SummarizeInput,
    s.SummarizeResult,
    "You write a resident's short summary description from its memories.",
    offline=offline.summarize,
    urgency=PLANNING,
    pace_share=1.0,  # a wake-up summary not made within a tick is made offline: it wakes
    words="wake-up summaries",
)

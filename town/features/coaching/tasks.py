"""The mock interview's tasks: a prompt beside each result model, its check and its offline
answer (``offline.py``). The town's own tasks (``town.llm.tasks``) do not include them."""

from __future__ import annotations

from importlib import resources
from typing import Any

from town.features.coaching import offline
from town.features.coaching import schemas as s
from town.llm.task import Task, make_task

PROMPTS = resources.files(__package__).joinpath("prompts")


def _quote_key(text: str) -> str:
    """Text compared for quoting: lower case, straight quotes, single spaces, no end marks."""
    flat = text.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
    return " ".join(flat.casefold().split()).strip(" .,;:!?\"'…")


def one_question(inputs: s.CoachTurnInput, result: s.CoachTurnResult) -> s.CoachTurnResult:
    """One question at a time, a follow-up only where allowed; an unknown bank id is dropped."""
    if result.text.count("?") > 1:
        raise ValueError('"text" must ask exactly one question; it has several question marks')
    if "?" in result.reply:
        raise ValueError('"reply" must not ask anything: the one question goes in "text"')
    if result.follow_up and not (inputs.may_follow_up and result.answered):
        raise ValueError('"follow_up" may be true only for an answer, when a follow-up is allowed')
    known = {q.id for q in inputs.bank}
    tidy: dict[str, Any] = {}
    if result.question_id and (result.question_id not in known or result.follow_up):
        tidy["question_id"] = ""
    if result.answered and not inputs.current_question:
        tidy["answered"] = False  # at the opening there is nothing to answer yet
    return result.model_copy(update=tidy) if tidy else result


def cited_answers(inputs: s.CoachReviewInput, result: s.CoachReviewResult) -> s.CoachReviewResult:
    """Insights cite the session's answers; the focus is made of the bank's topics."""
    ids = {a.id for a in inputs.answers}
    topics = {t.casefold(): t for t in inputs.topics}
    focus = [topics[f.casefold()] for f in result.focus if f.casefold() in topics]
    if not focus:
        raise ValueError(f'"focus" must name topics from {sorted(inputs.topics)}')
    strengths = [
        i.model_copy(update={"cites": [c for c in i.cites if c in ids]}) for i in result.strengths
    ]
    weak = [
        i.model_copy(update={"cites": [c for c in i.cites if c in ids]}) for i in result.weak_spots
    ]
    if not any(i.cites for i in weak):
        raise ValueError("each weak spot must cite the ids of the answers that show it")
    start = result.start_from if result.start_from in ids else None
    return result.model_copy(
        update={
            "focus": list(dict.fromkeys(focus)),
            "strengths": strengths,
            "weak_spots": weak,
            "start_from": start,
        }
    )


def quoted_answers(
    inputs: s.CoachFeedbackInput, result: s.CoachFeedbackResult
) -> s.CoachFeedbackResult:
    """Every point quotes, word for word, the answer it names."""
    answers = {a.id: _quote_key(a.answer) for a in inputs.answers}
    for n, point in enumerate(result.points):
        if point.answer_id not in answers:
            raise ValueError(f"points[{n}].answer_id {point.answer_id} is not an answer's id")
        if _quote_key(point.quote) not in answers[point.answer_id]:
            raise ValueError(
                f"points[{n}].quote is not copied exactly from answer {point.answer_id}"
            )
    return result


COACH_TURN = make_task(
    "coach_turn",
    s.CoachTurnInput,
    s.CoachTurnResult,
    "You run a mock job interview as an interviewer: one question at a time.",
    one_question,
    offline=offline.coach_turn,
    prompts=PROMPTS,
)
COACH_REVIEW = make_task(
    "coach_review",
    s.CoachReviewInput,
    s.CoachReviewResult,
    "You review a mock interview: the candidate's strengths and weak spots, citing the answers.",
    cited_answers,
    offline=offline.coach_review,
    prompts=PROMPTS,
)
COACH_FEEDBACK = make_task(
    "coach_feedback",
    s.CoachFeedbackInput,
    s.CoachFeedbackResult,
    "You give a candidate concrete feedback that quotes their own answers.",
    quoted_answers,
    offline=offline.coach_feedback,
    prompts=PROMPTS,
)

COACHING_TASKS: tuple[Task[Any, Any], ...] = (COACH_TURN, COACH_REVIEW, COACH_FEEDBACK)

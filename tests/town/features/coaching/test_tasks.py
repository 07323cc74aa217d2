"""The mock interview's tasks: their checks, offline answers, and the way over the wire."""

from __future__ import annotations

from typing import Any

import pytest

from standins.llm.server import running
from standins.llm.wire import KNOWN_TASKS
from tests.helpers import Composed
from tests.town.features.coaching.test_session import (
    ALICE,
    DANA,
    MIDDLING_ON_CALL,
    STRONG_DEBUGGING,
    THIN,
)
from town.features.coaching import schemas as s
from town.features.coaching.tasks import COACH_FEEDBACK, COACH_REVIEW, COACH_TURN, COACHING_TASKS
from town.llm.client import open_client
from town.llm.port import OfflineBrain


def _turn_inputs(**changes: Any) -> s.CoachTurnInput:
    base: dict[str, Any] = {
        "interviewer": DANA,
        "company": "Larkspur Freight",
        "role": "Senior Backend Engineer",
        "about": "payments",
        "candidate": ALICE,
        "session": 1,
        "question_number": 1,
        "questions_total": 4,
        "minutes_left": 30,
        "bank": [{"id": "hardest_bug", "topic": "debugging", "text": "The hardest bug?"}],
        "current_question": "How would you pay carriers?",
        "message": THIN,
        "may_follow_up": True,
    }
    return s.CoachTurnInput.model_validate({**base, **changes})


def test_the_turn_check_keeps_to_one_question_and_allowed_follow_ups() -> None:
    inputs = _turn_inputs()
    two = '{"answered": true, "follow_up": false, "text": "Why? And how?", "question_id": ""}'
    with pytest.raises(ValueError, match="exactly one question"):
        COACH_TURN.parse(inputs, two)
    asking = '{"answered": true, "reply": "Ok?", "follow_up": false, "text": "Next one?"}'
    with pytest.raises(ValueError, match="must not ask"):
        COACH_TURN.parse(inputs, asking)
    barred = _turn_inputs(may_follow_up=False)
    with pytest.raises(ValueError, match="follow_up"):
        COACH_TURN.parse(barred, '{"answered": true, "follow_up": true, "text": "More?"}')
    unknown = '{"answered": true, "follow_up": false, "text": "Bugs?", "question_id": "nope"}'
    assert COACH_TURN.parse(inputs, unknown).question_id == ""
    offline = OfflineBrain().answer(COACH_TURN, inputs)
    assert offline.follow_up and offline.answered and "walk me through" in offline.text
    hello = OfflineBrain().answer(COACH_TURN, _turn_inputs(message="Hi again, sorry I'm late!"))
    assert not hello.answered and hello.text == "Back to the question: How would you pay carriers?"
    full = OfflineBrain().answer(COACH_TURN, _turn_inputs(message=STRONG_DEBUGGING))
    assert full.answered and not full.follow_up and full.question_id == "hardest_bug"


def test_the_feedback_check_wants_exact_quotes_and_the_review_known_topics() -> None:
    answer = s.ReviewedAnswer(id=7, session=1, topic="debugging", question="Q?", answer=THIN)
    inputs = s.CoachFeedbackInput(interviewer=DANA, role="r", candidate=ALICE, answers=[answer])
    ok = '{"points": [{"answer_id": 7, "quote": "we used a QUEUE", "advice": "Say more."}]}'
    assert COACH_FEEDBACK.parse(inputs, ok).points[0].answer_id == 7
    made_up = '{"points": [{"answer_id": 7, "quote": "we used Kafka", "advice": "Say more."}]}'
    with pytest.raises(ValueError, match="not copied exactly"):
        COACH_FEEDBACK.parse(inputs, made_up)
    with pytest.raises(ValueError, match="not an answer's id"):
        COACH_FEEDBACK.parse(inputs, made_up.replace('"answer_id": 7', '"answer_id": 8'))
    review_in = s.CoachReviewInput(
        interviewer=DANA,
        company="c",
        role="r",
        candidate=ALICE,
        session=1,
        topics=["debugging"],
        answers=[answer],
        minutes=10,
        next_steps="More.",
    )
    reply = (
        '{"weak_spots": [{"text": "thin", "cites": [7, 99]}], "focus": ["%s"], '
        '"start_from": 99, "plan": "p", "closing": "c"}'
    )
    parsed = COACH_REVIEW.parse(review_in, reply % "Debugging")
    assert parsed.focus == ["debugging"] and parsed.weak_spots[0].cites == [7]
    assert parsed.start_from is None  # 99 is no answer of this session
    with pytest.raises(ValueError, match="focus"):
        COACH_REVIEW.parse(review_in, reply % "cooking")


async def test_the_coaching_tasks_go_over_the_wire_to_an_openai_compatible_server() -> None:
    assert {t.name for t in COACHING_TASKS} == {"coach_turn", "coach_review", "coach_feedback"}
    assert all(KNOWN_TASKS[task.name] is task for task in COACHING_TASKS)
    answer = s.ReviewedAnswer(
        id=3, session=1, topic="debugging", question="Q", answer=STRONG_DEBUGGING
    )
    samples: list[tuple[Any, Any]] = [
        (COACH_TURN, _turn_inputs()),
        (
            COACH_REVIEW,
            s.CoachReviewInput(
                interviewer=DANA,
                company="c",
                role="r",
                candidate=ALICE,
                session=1,
                topics=["debugging", "reliability"],
                answers=[answer],
                minutes=12,
                next_steps="Next: system design.",
            ),
        ),
        (
            COACH_FEEDBACK,
            s.CoachFeedbackInput(interviewer=DANA, role="r", candidate=ALICE, answers=[answer]),
        ),
    ]
    async with running() as url:
        client = open_client(url, "sk-test", 5)
        gateway = Composed(client, "town-model")
        try:
            for task, inputs in samples:
                system = " ".join(task.render(inputs)[0]["content"].split())
                assert "Asked sincerely whether it is an AI, it says it is an AI" in system
                result = await gateway.run(task, inputs, resident=DANA)
                assert result == OfflineBrain().answer(task, inputs), task.name
            assert gateway.mode == "llm"
        finally:
            await client.close()


def test_offline_feedback_quotes_the_shortest_and_longest_answers() -> None:
    answers = [
        s.ReviewedAnswer(id=i, session=1, topic=t, question="Q", answer=a)
        for i, (t, a) in enumerate(
            [("design", THIN), ("debugging", STRONG_DEBUGGING), ("ops", MIDDLING_ON_CALL)], 1
        )
    ]
    result = OfflineBrain().answer(
        COACH_FEEDBACK,
        s.CoachFeedbackInput(interviewer=DANA, role="r", candidate=ALICE, answers=answers),
    )
    by_id = {a.id: a.answer for a in answers}
    assert [p.answer_id for p in result.points] == [1, 2, 3]  # shortest, longest, no number
    assert result.points[0].quote == "We used a queue"
    assert "shortest answer (4 words" in result.points[0].advice
    assert "most complete answer" in result.points[1].advice
    assert "no number" in result.points[2].advice
    for point in result.points:
        assert point.quote.removesuffix("…") in by_id[point.answer_id]

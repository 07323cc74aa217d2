"""The mock interviewer's offline answers (``Task.offline``): plain rules on the candidate's words.

- An answer is *thin* when it is short (under 25 words) or has neither a number nor a concrete
  example ("for example", "when I ...", "last year", "I built ..."); a thin answer gets the bank's
  follow-up for its question (or a generic one naming what is missing), once.
- The next question is the first of the bank the interviewer hands over (it puts the planned
  focus first); a later session opens by naming the earlier answer it builds on.
- A question to the interviewer (short, ending in "?") or a greeting is no answer: it is
  answered and the question asked again; asked whether it is an AI, the interviewer says yes.
- The review calls the most complete answers strengths and the thin ones weak spots (quoting
  each), plans the next session on the weak spots' topics and starts it from the weakest answer.
- Feedback quotes the shortest and the longest answers, then any answer with no number in it.
"""

from __future__ import annotations

import re

from town.features.coaching import schemas as s
from town.llm.offline.hearing import Hearing
from town.llm.offline.lexicon import AI_WORDS, GREETINGS
from town.llm.offline.text import first_name, words
from town.llm.schemas import Insight

SHORT_ANSWER = 25  # words
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"forty|fifty|sixty|hundred|hundreds|thousand|thousands|million|millions|percent|half|"
    r"double|doubled|twice|triple|tripled|dozen)\b",
    re.IGNORECASE,
)
_EXAMPLE = re.compile(
    r"\b(?:for example|for instance|such as|when (?:i|we)|at my (?:last|previous|current)|"
    r"last (?:year|month|week|quarter)|one time|once|in (?:19|20)\d\d|"
    r"i (?:led|built|wrote|fixed|found|owned|designed|migrated|ran|shipped|launched|moved|"
    r"changed|proposed|started|noticed|traced|added|set up|rewrote)|we (?:had|built|shipped))\b",
    re.IGNORECASE,
)
_AI_QUESTION = re.compile(r"\b(?:are|r)\s+(?:you|u)\b(.*)", re.IGNORECASE)
_ASIDE_WORDS = 20  # a question to the interviewer is shorter than an answer
_GREETING_WORDS = 6  # "hi, I'm back" is no answer


def missing(answer: str) -> list[str]:
    """What a thin answer lacks ([] when it is not thin)."""
    count = len(words(answer))
    number, example = bool(_NUMBER.search(answer)), bool(_EXAMPLE.search(answer))
    if count >= SHORT_ANSWER and (number or example):
        return []
    lacks = [] if count >= SHORT_ANSWER else ["detail"]
    if not example:
        lacks.append("a concrete example")
    if not number:
        lacks.append("a number")
    return lacks


def excerpt(text: str, limit: int = 12) -> str:
    """The first ``limit`` words of ``text`` exactly as written, up to any question mark."""
    head = text.split("?", 1)[0].strip()
    parts = head.split()
    cut = " ".join(parts[:limit]).rstrip(" ,;:.!")
    return cut + ("…" if len(parts) > limit or len(head) < len(text.strip()) else "")


def _listing(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _asks_if_ai(message: str) -> bool:
    match = _AI_QUESTION.search(message)
    return match is not None and bool(set(words(match.group(1))) & AI_WORDS)


def _is_aside(message: str) -> bool:
    """A question to the interviewer, or a greeting: not an answer."""
    said = words(message)
    if len(said) <= _GREETING_WORDS and set(said) & GREETINGS:
        return True
    return message.rstrip().endswith("?") and len(said) < _ASIDE_WORDS


def _next(inputs: s.CoachTurnInput, lead: str = "") -> tuple[str, str]:
    """(text, id) of the next question: the first the interviewer handed over."""
    if not inputs.bank:
        return f"{lead}What else from your own work would you like to practise today?", ""
    question = inputs.bank[0]
    return f"{lead}{question.text}", question.id


def _opening(inputs: s.CoachTurnInput) -> s.CoachTurnResult:
    name = first_name(inputs.candidate)
    if inputs.session == 1:
        reply = (
            f"Hello {name}, I'm {inputs.interviewer}. This is a practice interview for "
            f"{inputs.role} at {inputs.company}: about {inputs.minutes_left} minutes and "
            f"{inputs.questions_total} questions, one at a time. Real examples beat theory."
        )
        text, question_id = _next(inputs)
    else:
        focus = _listing(inputs.focus) if inputs.focus else "your weaker answers"
        reply = f"Welcome back, {name}. Last time we agreed to work on {focus}."
        lead = ""
        if inputs.builds_on is not None:
            earlier = inputs.builds_on
            reply += (
                f" On {earlier.topic} you said “{excerpt(earlier.answer)}”, so let's build on that."
            )
            lead = f"Going deeper on {earlier.topic}: "
        text, question_id = _next(inputs, lead)
    return s.CoachTurnResult(
        answered=False, reply=reply, follow_up=False, text=text, question_id=question_id
    )


def _again(inputs: s.CoachTurnInput) -> tuple[str, str]:
    if inputs.current_question:
        return f"Back to the question: {inputs.current_question}", ""
    return _next(inputs)


def _follow_up(inputs: s.CoachTurnInput, lacks: list[str]) -> str:
    if inputs.current_follow_up:
        return inputs.current_follow_up
    if "a concrete example" in lacks or "detail" in lacks:
        return "Can you walk me through one specific time, step by step, and what you did yourself?"
    return "Can you put a number on that: how big, how fast, or how much it changed?"


def coach_turn(inputs: s.CoachTurnInput, hearing: Hearing) -> s.CoachTurnResult:
    message = inputs.message
    if _asks_if_ai(message):
        text, question_id = _again(inputs)
        reply = (
            f"Yes: I'm an AI character, a simulated interviewer in this practice office, not a "
            f"person. I'm here so you can rehearse, {first_name(inputs.candidate)}."
        )
        return s.CoachTurnResult(
            answered=False, reply=reply, follow_up=False, text=text, question_id=question_id
        )
    if not inputs.current_question:
        return _opening(inputs)
    if _is_aside(message):
        text, question_id = _again(inputs)
        reply = (
            "Fair question. Take it as you understand it and say your assumptions out loud."
            if message.rstrip().endswith("?")
            else f"Hello again, {first_name(inputs.candidate)}. Take your time."
        )
        return s.CoachTurnResult(
            answered=False, reply=reply, follow_up=False, text=text, question_id=question_id
        )
    lacks = missing(message)
    if lacks and inputs.may_follow_up:
        return s.CoachTurnResult(
            answered=True,
            reply=f"Thanks. I'd like a bit more: it lacked {_listing(lacks)}.",
            follow_up=True,
            text=_follow_up(inputs, lacks),
        )
    reply = "Thanks, that was concrete." if not lacks else "Thanks. Let's move on."
    text, question_id = _next(inputs)
    return s.CoachTurnResult(
        answered=True, reply=reply, follow_up=False, text=text, question_id=question_id
    )


def _score(answer: s.ReviewedAnswer) -> int:
    text = answer.answer
    return len(words(text)) + 20 * bool(_NUMBER.search(text)) + 20 * bool(_EXAMPLE.search(text))


def coach_review(inputs: s.CoachReviewInput, hearing: Hearing) -> s.CoachReviewResult:
    who, name = inputs.candidate, first_name(inputs.candidate)
    ranked = sorted(inputs.answers, key=_score, reverse=True)
    solid = [a for a in ranked if not missing(a.answer)][:2]
    thin = [a for a in reversed(ranked) if missing(a.answer)][:2] or ranked[-1:]
    strengths = [
        Insight(
            text=f"{who} answered on {a.topic} with substance: “{excerpt(a.answer)}”", cites=[a.id]
        )
        for a in solid
    ]
    weak_spots = [
        Insight(
            text=(
                f"{who}'s answer on {a.topic} lacked {_listing(missing(a.answer) or ['depth'])}: "
                f"“{excerpt(a.answer)}”"
            ),
            cites=[a.id],
        )
        for a in thin
    ]
    answered = {a.topic.casefold() for a in inputs.answers}
    fresh = [t for t in inputs.topics if t.casefold() not in answered]
    focus = list(dict.fromkeys([a.topic for a in thin] + fresh[:1]))[:2]
    weakest = thin[0]
    plan = (
        f"Start the next session with {focus[0]}, building on {who}'s answer "
        f"“{excerpt(weakest.answer)}”: ask for a concrete example, their own part and a number."
    )
    best = (
        f"Your strongest answer was on {solid[0].topic}"
        if solid
        else f"No answer had both detail and an example or a number yet; the fullest was on "
        f"{ranked[0].topic}"
    )
    closing = (
        f"That's our time, {name}: {len(inputs.answers)} answers in {inputs.minutes} minutes. "
        f"{best}; the one to work on is {weakest.topic}, "
        f"which lacked {_listing(missing(weakest.answer) or ['depth'])}. "
        f"Next time we'll start with {_listing(focus)}. {inputs.next_steps}"
    )
    return s.CoachReviewResult(
        strengths=strengths,
        weak_spots=weak_spots,
        focus=focus,
        plan=plan,
        start_from=weakest.id,
        closing=closing,
    )


def _point(answer: s.ReviewedAnswer, advice: str) -> s.FeedbackPoint:
    return s.FeedbackPoint(answer_id=answer.id, quote=excerpt(answer.answer, 10), advice=advice)


def coach_feedback(inputs: s.CoachFeedbackInput, hearing: Hearing) -> s.CoachFeedbackResult:
    answers = inputs.answers
    by_length = sorted(answers, key=lambda a: (len(words(a.answer)), a.id))
    shortest, longest = by_length[0], by_length[-1]
    points = []
    lacks = missing(shortest.answer)
    points.append(
        _point(
            shortest,
            f"Your shortest answer ({len(words(shortest.answer))} words, on {shortest.topic})"
            + (f" lacked {_listing(lacks)}." if lacks else " was still complete.")
            + " Tell it as one story: the situation, what you did yourself, and the result.",
        )
    )
    if longest.id != shortest.id:
        lacks = missing(longest.answer)
        advice = (
            f"Your most complete answer ({len(words(longest.answer))} words, on {longest.topic})"
        )
        advice += (
            f": aim for this level of detail, and add {_listing(lacks)}."
            if lacks
            else ": this is the level of detail to aim for in every answer."
        )
        points.append(_point(longest, advice))
    used = {shortest.id, longest.id}
    for answer in answers:
        if answer.id not in used and not _NUMBER.search(answer.answer) and len(points) < 4:
            used.add(answer.id)
            points.append(
                _point(
                    answer,
                    f"On {answer.topic} you gave no number: say how many, how fast, or how "
                    "much it changed.",
                )
            )
    return s.CoachFeedbackResult(points=points)

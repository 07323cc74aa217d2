"""The judge of "do you know ...?" answers (the society measures): the ``judge_knows`` task (its
prompt in ``prompts/``) and the offline brain's answer to it.

The rule: an answer says "yes" when one of its sentences names a keyword of the subject (a fact's
keywords, or a resident's full or first name) and holds no negation ("not", "don't", "never",
"no idea", ...); otherwise "no". It judges what the answer claims, not whether it is true.
"""

from __future__ import annotations

import re
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from town.llm.offline.hearing import Hearing
from town.llm.schemas import Name, Remark
from town.llm.structured import Schema
from town.llm.task import make_task

PROMPTS = resources.files(__package__).joinpath("prompts")

NEGATION = re.compile(
    r"\b(?:not|no|never|nobody|nothing|none|unknown|unsure|cannot|can't|cant|don't|dont|"
    r"doesn't|didn't|haven't|hasn't|hadn't|isn't|aren't|wasn't|won't|wouldn't|n't)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


class JudgeKnowsInput(BaseModel):
    """A resident's answer to "do you know ...?", to be judged yes or no."""

    model_config = ConfigDict(frozen=True)

    question: str
    answer: str
    subject: str = Field(description="What the question asks about: a fact or a resident.")
    keywords: list[str] = Field(
        default_factory=list, description="Words an answer that knows the subject would name."
    )


class JudgeKnowsResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    verdict: Name = Field(min_length=1, description='"yes" or "no".')
    reason: Remark = ""


def _yes_or_no(inputs: JudgeKnowsInput, schema: Schema) -> None:
    """The verdict is a closed set: "yes" or "no"."""
    verdict = schema["properties"]["verdict"]
    for key in ("maxLength", "minLength", "pattern"):
        verdict.pop(key, None)
    verdict["enum"] = ["yes", "no"]


def names_keyword(text: str, keywords: list[str]) -> str:
    """The first keyword named in ``text`` as a whole word (case-insensitive), or ''."""
    for keyword in keywords:
        word = keyword.strip()
        if word and re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE):
            return word
    return ""


def judge_knows(inputs: JudgeKnowsInput, hearing: Hearing) -> JudgeKnowsResult:
    negated = ""
    for sentence in _SENTENCE.split(inputs.answer.replace("’", "'")):
        found = names_keyword(sentence, inputs.keywords)
        if not found:
            continue
        if NEGATION.search(sentence):
            negated = found
            continue
        return JudgeKnowsResult(verdict="yes", reason=f"names {found!r} with no negation")
    if negated:
        return JudgeKnowsResult(verdict="no", reason=f"names {negated!r} only with a negation")
    return JudgeKnowsResult(verdict="no", reason="names none of the keywords")


JUDGE_KNOWS = make_task(
    "judge_knows",
    JudgeKnowsInput,
    JudgeKnowsResult,
    "You judge whether an answer claims to know about something: yes or no.",
    offline=judge_knows,
    shaper=_yes_or_no,
    prompts=PROMPTS,
)

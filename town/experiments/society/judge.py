"""The judge of "do you know ...?" answers (the society measures): the ``judge_knows`` task (its
prompt in ``prompts/``) and the offline brain's answer to it.

The rule: an answer says "yes" when one of its sentences names a keyword of the subject (a fact's
keywords, or a resident's full or first name) and holds no negation ("not", "don't", "never",
"no idea", ...); otherwise "no". It judges what the answer claims, not whether it is true.
"""

from __future__ import annotations

import re
from importlib import resources

from town.llm import schemas as s
from town.llm.task import make_task

PROMPTS = resources.files(__package__).joinpath("prompts")

NEGATION = re.compile(
    r"\b(?:not|no|never|nobody|nothing|none|unknown|unsure|cannot|can't|cant|don't|dont|"
    r"doesn't|didn't|haven't|hasn't|hadn't|isn't|aren't|wasn't|won't|wouldn't|n't)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


def names_keyword(text: str, keywords: list[str]) -> str:
    """The first keyword named in ``text`` as a whole word (case-insensitive), or ''."""
    for keyword in keywords:
        word = keyword.strip()
        if word and re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.IGNORECASE):
            return word
    return ""


def judge_knows(inputs: s.JudgeKnowsInput) -> s.JudgeKnowsResult:
    negated = ""
    for sentence in _SENTENCE.split(inputs.answer.replace("’", "'")):
        found = names_keyword(sentence, inputs.keywords)
        if not found:
            continue
        if NEGATION.search(sentence):
            negated = found
            continue
        return s.JudgeKnowsResult(verdict="yes", reason=f"names {found!r} with no negation")
    if negated:
        return s.JudgeKnowsResult(verdict="no", reason=f"names {negated!r} only with a negation")
    return s.JudgeKnowsResult(verdict="no", reason="names none of the keywords")


JUDGE_KNOWS = make_task(
    "judge_knows",
    s.JudgeKnowsInput,
    s.JudgeKnowsResult,
    "You judge whether an answer claims to know about something: yes or no.",
    offline=judge_knows,
    prompts=PROMPTS,
)

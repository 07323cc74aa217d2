"""Offline answers to the small tasks of noticing: how memorable, which emoji, what an object's
state becomes."""

from __future__ import annotations

import re

from town.llm import schemas as s
from town.llm.offline.hearing import Hearing
from town.llm.offline.lexicon import STATE_CHANGES
from town.llm.offline.text import emoji_for, importance, words


def rate_importance(inputs: s.RateImportanceInput, hearing: Hearing) -> s.RateImportanceResult:
    return s.RateImportanceResult(scores=[importance(o) for o in inputs.observations])


def emoji(inputs: s.EmojiInput, hearing: Hearing) -> s.EmojiResult:
    return s.EmojiResult(emoji=emoji_for(inputs.action))


def object_state(inputs: s.ObjectStateInput, hearing: Hearing) -> s.ObjectStateResult:
    action = inputs.action.lower()
    for phrases, state in STATE_CHANGES:
        if any(re.search(rf"\b{re.escape(phrase)}", action) for phrase in phrases):
            return s.ObjectStateResult(state=state)
    if set(words(inputs.object)) & set(words(action)):
        return s.ObjectStateResult(state="in use")
    return s.ObjectStateResult(state=inputs.state or "idle")

"""The tasks of noticing: how memorable events are, whether to react, emoji, objects' states."""

from __future__ import annotations

from town.llm import schemas as s
from town.llm.offline import noticing as offline
from town.llm.offline import social
from town.llm.structured import Schema, exactly, prop
from town.llm.task import make_task
from town.llm.urgency import BACKGROUND


def _one_score_each(inputs: s.RateImportanceInput, schema: Schema) -> None:
    exactly(prop(schema, "scores"), len(inputs.observations))


def _importance_count(
    inputs: s.RateImportanceInput, result: s.RateImportanceResult
) -> s.RateImportanceResult:
    if len(result.scores) != len(inputs.observations):
        raise ValueError(
            f"expected {len(inputs.observations)} scores (one per observation), "
            f"got {len(result.scores)}"
        )
    return result


RATE_IMPORTANCE = make_task(
    "rate_importance",
    s.RateImportanceInput,
    s.RateImportanceResult,
    "You judge how memorable events are to one resident.",
    _importance_count,
    offline=offline.rate_importance,
    shaper=_one_score_each,
    urgency=BACKGROUND,
    pace_share=0.2,
    words="ratings",
)


def _someone_present(inputs: s.ReactInput, schema: Schema) -> None:
    """``talk_to`` names one of the people present, or nobody (no one there: only null)."""
    names = list(dict.fromkeys(name for name in inputs.present if name))
    schema["properties"]["talk_to"] = (
        {"anyOf": [{"type": "string", "enum": names}, {"type": "null"}]}
        if names
        else {"type": "null"}
    )


def _talk_to_present(inputs: s.ReactInput, result: s.ReactResult) -> s.ReactResult:
    """Talk only to someone present, and only when reacting."""
    talk_to = s.present_named(inputs, result.talk_to) if result.react else None
    return s.ReactResult(react=result.react, reaction=result.reaction.strip(), talk_to=talk_to)


REACT = make_task(
    "react",
    s.ReactInput,
    s.ReactResult,
    "You decide whether a resident carries on with the plan or reacts to what it noticed.",
    _talk_to_present,
    offline=social.react,
    shaper=_someone_present,
    words="reactions",
)
EMOJI = make_task(
    "emoji",
    s.EmojiInput,
    s.EmojiResult,
    "You turn an action into a few emoji shown beside a resident's name.",
    offline=offline.emoji,
    words="emoji",
)
OBJECT_STATE = make_task(
    "object_state",
    s.ObjectStateInput,
    s.ObjectStateResult,
    "You say how an object's state changes when someone acts on it.",
    offline=offline.object_state,
    words="changes to things",
)

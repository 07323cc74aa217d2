"""The A/B split: by resident each resident keeps one model; by message each call picks one
and the resident's latest words name it; the town's events carry the model."""

from __future__ import annotations

import random

import pytest

from tests.fakes.brain import ScriptedBrain
from town.features.ratings.split import SplitBrain
from town.llm.schemas import UtterInput
from town.llm.tasks import UTTER

NAMES = [f"Resident {n}" for n in range(40)]


def two() -> tuple[ScriptedBrain, ScriptedBrain]:
    """Two brains that answer every utterance from their queues."""
    brains = ScriptedBrain(), ScriptedBrain()
    for brain in brains:
        for _ in range(20):
            brain.enqueue("utter", {"text": "Hello.", "end": False})
    return brains


def words(speaker: str) -> UtterInput:
    return UtterInput.model_construct(speaker=speaker)  # (the scripted brains never read it)


async def test_by_resident_each_keeps_one_model_and_both_are_used() -> None:
    a, b = two()
    split = SplitBrain(("model-a", a), ("model-b", b))
    sides = {name: split.models[split.side_of(name)] for name in NAMES}
    assert set(sides.values()) == {"model-a", "model-b"}
    again = SplitBrain(("model-a", a), ("model-b", b))
    assert again.models[again.side_of("Resident 3")] == sides["Resident 3"]
    said = words("Resident 3")
    await split.run(UTTER, said, resident="Resident 3")
    await split.run(UTTER, said, resident=None)  # the town's own thinking: the first model
    asked = {"model-a": a, "model-b": b}[sides["Resident 3"]]
    assert asked.history[0].resident == "Resident 3"
    assert a.history[-1].resident is None


async def test_by_message_each_call_may_go_to_either_model() -> None:
    a, b = two()
    split = SplitBrain(("model-a", a), ("model-b", b), by="message", rng=random.Random(3))
    said = words("Ann")
    for _ in range(12):
        await split.run(UTTER, said, resident="Ann")
    assert a.history and b.history and len(a.history) + len(b.history) == 12
    with pytest.raises(ValueError, match="two different models"):
        SplitBrain(("same", a), ("same", b))

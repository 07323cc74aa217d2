"""A reaction talks only to someone there and awake: never to a sentence or a stranger."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.factories import CAFE_PAIR, at_cafe, make_engine, resident, until
from tests.fakes.brain import ScriptedBrain
from town.inputs.admin import whisper
from town.llm.schemas import ReactInput
from town.llm.task import Task
from town.store.db import Store
from town.tick.state import ResidentState

SENTENCE = "Sure, I will go and ask Klaus about his research right now."


class Reacting(ScriptedBrain):
    """Always reacts, naming whom ``talk_to`` picks from the inputs (as a model might write it)."""

    def __init__(self, talk_to: Callable[[ReactInput], str]) -> None:
        super().__init__()
        self.talk_to = talk_to

    async def run(self, task: Task[Any, Any], inputs: Any, *, resident: str | None = None) -> Any:
        if task.name == "react":
            reply = {"react": True, "reaction": "waving", "talk_to": self.talk_to(inputs)}
            self.enqueue("react", reply)
        return await super().run(task, inputs, resident=resident)


async def _react_once(store: Store, talk_to: Callable[[ReactInput], str]) -> Reacting:
    """Klaus, at the cafe with Isabella, reacts to an inner voice (a reaction that overrides the
    talk cooldown) with ``talk_to``'s name."""
    brain = Reacting(lambda _: "")
    engine = await make_engine(store, brain)
    await until(engine, at_cafe(store, *CAFE_PAIR))
    await until(engine, lambda: all(_talk(store, n) is None for n in CAFE_PAIR))
    brain.talk_to = talk_to
    brain.history.clear()
    await whisper(engine, "Klaus", "You should talk to someone about your research")
    await engine.tick()  # the inner voice is perceived
    await engine.tick()  # and reacted to
    await engine.tick()  # a talk begun would have its first words now
    return brain


def _talk(store: Store, name: str) -> int | None:
    return ResidentState.of(resident(store, name)).talk


def _klaus_present(brain: Reacting) -> list[str]:
    calls = [c for c in brain.calls("react") if c.resident == "Klaus Mueller"]
    assert calls
    present: list[str] = calls[-1].inputs.present
    return present


@pytest.mark.parametrize(
    "talk_to",
    [
        lambda _: SENTENCE,
        lambda _: "Alice",  # a visitor's name: answered when heard, never from a reaction
        lambda inputs: inputs.resident,  # oneself
    ],
)
async def test_a_name_not_of_those_present_starts_no_talk(
    store: Store, talk_to: Callable[[ReactInput], str]
) -> None:
    brain = await _react_once(store, talk_to)
    assert _klaus_present(brain) == ["Isabella Rodriguez"]  # there and awake, not himself
    assert all(_talk(store, n) is None for n in CAFE_PAIR)
    assert brain.calls("utter") == []  # nobody answered, by name or sentence


async def test_someone_present_named_in_any_case_is_talked_to(store: Store) -> None:
    brain = await _react_once(store, lambda inputs: inputs.present[0].upper())
    assert _klaus_present(brain) == ["Isabella Rodriguez"]
    assert _talk(store, "Klaus Mueller") is not None
    assert _talk(store, "Isabella Rodriguez") == _talk(store, "Klaus Mueller")  # the same talk
    first = brain.calls("utter")[0].inputs
    assert (first.speaker, first.listener) == CAFE_PAIR[::-1]

"""The A/B split: by resident each resident keeps one model; by message each call picks one
and the resident's latest words name it; the town's events carry the model."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from sqlmodel import select

from bot.runtime.settings import load_settings
from bot.runtime.wiring import model_of
from town.features.ratings.split import SplitBrain
from town.llm.port import ScriptedBrain
from town.llm.schemas import UtterInput
from town.llm.tasks import UTTER
from town.outbox.events import TownEvent, speaking_models, write_outbox
from town.store.db import Store
from town.store.models import OutboxEvent, Town

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
    sides = {name: split.model_of(name) for name in NAMES}
    assert set(sides.values()) == {"model-a", "model-b"}
    assert SplitBrain(("model-a", a), ("model-b", b)).model_of("Resident 3") == sides["Resident 3"]
    said = words("Resident 3")
    await split.run(UTTER, said, resident="Resident 3")
    await split.run(UTTER, said, resident=None)  # the town's own thinking: the first model
    asked = {"model-a": a, "model-b": b}[sides["Resident 3"]]
    assert asked.history[0].resident == "Resident 3"
    assert a.history[-1].resident is None


async def test_by_message_the_latest_call_names_the_model() -> None:
    a, b = two()
    split = SplitBrain(("model-a", a), ("model-b", b), by="message", rng=random.Random(3))
    said = words("Ann")
    seen = set()
    for _ in range(12):
        before = len(b.history)
        await split.run(UTTER, said, resident="Ann")
        latest = "model-b" if len(b.history) > before else "model-a"
        assert split.model_of("Ann") == latest
        seen.add(latest)
    assert seen == {"model-a", "model-b"}
    with pytest.raises(ValueError, match="two different models"):
        SplitBrain(("same", a), ("same", b))


def test_the_town_records_the_model_in_residents_events(store: Store) -> None:
    settings = load_settings(brain="offline")
    speaking_models(store.engine, 1, model_of(settings, ScriptedBrain()))
    with store.session() as s:
        s.add(Town(id=1, name="t", clock=datetime(2023, 2, 13, tzinfo=UTC)))
        s.flush()
        at = datetime(2023, 2, 13, 8, tzinfo=UTC)
        spoken = TownEvent("said", "Cafe", at, "Ann", "Hello.")
        told = TownEvent("notice", "Cafe", at, "", "The cafe opens.")
        chosen = TownEvent("said", "Cafe", at, "Bob", "Hi.", {"model": "kept"})
        write_outbox(s, 1, "k", [spoken, told, chosen])
    with store.session() as s:
        rows = s.exec(select(OutboxEvent).order_by(OutboxEvent.id)).all()  # type: ignore[arg-type]
    assert [r.payload.get("model") for r in rows] == ["offline", None, "kept"]

"""Adding a task is two edits, its module and its prompt file (ARCHITECTURE.md, "How to add a
task"): a toy task made exactly that way runs through the fake server and the offline brain."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from standins.llm.server import running
from tests.helpers import Composed
from town.llm import made
from town.llm.client import open_client
from town.llm.offline.hearing import Hearing
from town.llm.port import OfflineBrain
from town.llm.structured import Schema, exactly, prop
from town.llm.task import Task, make_task
from town.llm.urgency import BACKGROUND


class MoodInput(BaseModel):
    resident: str
    events: list[str]


class MoodResult(BaseModel):
    moods: list[Literal["glad", "calm", "cross"]]
    why: str = Field(max_length=80)


def one_mood_an_event(inputs: MoodInput, schema: Schema) -> None:
    exactly(prop(schema, "moods"), len(inputs.events))


def moods_offline(inputs: MoodInput, hearing: Hearing) -> MoodResult:
    cross = ("burnt", "late", "broken")
    moods = ["cross" if any(w in e for w in cross) else "calm" for e in inputs.events]
    return MoodResult(moods=moods, why="from the words of the events")  # type: ignore[arg-type]


def a_mood_an_event(inputs: MoodInput, result: MoodResult) -> MoodResult:
    if len(result.moods) != len(inputs.events):
        raise ValueError(f"expected {len(inputs.events)} moods, one an event")
    return result


def toy_task(prompts: Path) -> Task[MoodInput, MoodResult]:
    """The task's module: its models, shaper, check, offline answer and urgency, as above,
    and this one definition beside its prompt file."""
    return make_task(
        "toy_mood",
        MoodInput,
        MoodResult,
        "You say how a resident feels about each event.",
        a_mood_an_event,
        offline=moods_offline,
        shaper=one_mood_an_event,
        urgency=BACKGROUND,
        words="moods",  # how ``status`` names it
        prompts=prompts,  # type: ignore[arg-type]  # (a folder: read as the package's prompts)
    )


async def test_a_toy_task_runs_through_the_fake_server_and_the_offline_brain(
    tmp_path: Path,
) -> None:
    (tmp_path / "toy_mood.txt").write_text("How does $resident feel after each of $events?\n")
    task = toy_task(tmp_path)
    inputs = MoodInput(resident="Isabella Rodriguez", events=["the toast burnt", "a sunny walk"])
    schema = task.schema_for(inputs)
    assert schema["properties"]["moods"]["minItems"] == 2
    async with running() as url:
        client = open_client(url, "key", 5.0, 0)
        brain = Composed(client, "m")
        by_model = await brain.run(task, inputs)
        await client.close()
    assert made.made_by(by_model) == "m" and len(by_model.moods) == 2
    assert brain.report.as_json()["answers_by_task"] == {"toy_mood": {"model": 1, "fallback": 0}}
    assert brain.report.in_words("toy_mood") == "moods"  # the task's own words, no registry
    offline = OfflineBrain().answer(task, inputs)
    assert offline.moods == ["cross", "calm"] and made.made_by(offline) == made.OFFLINE

"""The experiments' thinking tasks, apart from the town's own (``town.llm.tasks.TASKS``):
each experiment keeps its tasks, prompts and offline answers beside it (``gather/tasks.py``,
``society/judge.py``), as a feature does (``town.features.coaching.tasks``)."""

from __future__ import annotations

from typing import Any

from town.experiments.gather.tasks import GATHER_TASKS
from town.experiments.society.judge import JUDGE_KNOWS
from town.llm.task import Task

EXPERIMENT_TASKS: tuple[Task[Any, Any], ...] = (*GATHER_TASKS, JUDGE_KNOWS)

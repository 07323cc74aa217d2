"""The experiments' thinking tasks by name, apart from the town's own (``town.llm.tasks.TASKS``):
each experiment keeps its tasks, prompts and offline answers beside it (``gather/tasks.py``,
``society/judge.py``), as a feature does (``town.features.coaching.tasks``)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from town.experiments.gather.tasks import GATHER_TASKS
from town.experiments.society.judge import JUDGE_KNOWS
from town.llm.task import Task

EXPERIMENT_TASKS: Mapping[str, Task[Any, Any]] = MappingProxyType(
    {t.name: t for t in (*GATHER_TASKS, JUDGE_KNOWS)}
)
"""The experiments' tasks by name (read-only)."""

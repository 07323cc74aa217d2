"""The offline fallback: when the model's brain raises :class:`~town.llm.made.Unusable` (or any
error: ``error``), the offline brain answers, stamped ``offline (<reason>)``; the town never sees
an exception from thinking.
"""

from __future__ import annotations

import logging

from town.llm import made
from town.llm.port import Brain, I, R
from town.llm.task import Task

log = logging.getLogger(__name__)


class Fallback:
    """``model``'s answers, or ``offline``'s with the reason."""

    def __init__(self, model: Brain, offline: Brain) -> None:
        self.model = model
        self.offline = offline

    @property
    def name(self) -> str:
        return self.model.name

    async def run(self, task: Task[I, R], inputs: I, *, resident: str | None = None) -> R:
        try:
            return await self.model.run(task, inputs, resident=resident)
        except made.Unusable as error:
            reason = error.reason
            if reason != made.PACE:  # (counted by task, as those sent offline at once)
                level = logging.INFO if error.quiet else logging.WARNING
                log.log(
                    level,
                    "LLM gave no usable %s answer (%s); the offline brain answers",
                    task.name,
                    error,
                )
        except Exception as error:  # never raise into the town
            reason = "error"
            log.warning(
                "LLM %s call failed (%s); the offline brain answers",
                task.name,
                type(error).__name__,
                exc_info=log.isEnabledFor(logging.DEBUG),
            )
        answer = await self.offline.run(task, inputs, resident=resident)
        return made.stamp(answer, made.offline(reason))

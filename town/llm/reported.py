"""Usage and reporting, the outer end of the chain: each thought's
:class:`~town.llm.usage.Spend` recorded with the usage recorder (the daily budget reads it), and
its answer counted in the :class:`~town.llm.report.AnswerReport` by task and by who made it.
"""

from __future__ import annotations

import logging

from town.llm import made
from town.llm.port import Brain, I, R
from town.llm.report import AnswerReport
from town.llm.task import Task
from town.llm.usage import Spend, UsageRecorder, spending

log = logging.getLogger(__name__)


class Reported:
    """``inner``'s answers, each one's spending recorded and its maker counted."""

    def __init__(self, inner: Brain, report: AnswerReport, usage: UsageRecorder) -> None:
        self.inner = inner
        self.report = report
        self.usage = usage

    @property
    def name(self) -> str:
        return self.inner.name

    async def run(self, task: Task[I, R], inputs: I, *, resident: str | None = None) -> R:
        spend = Spend()
        try:
            with spending(spend):
                result = await self.inner.run(task, inputs, resident=resident)
            who = made.made_by(result)
            by_model = made.by_model(who)
            self.usage.record(
                task.name,
                resident,
                spend.calls,
                spend.prompt_tokens,
                spend.completion_tokens,
                not by_model,
            )
        finally:
            spend.release()  # recorded (or given up): the budget counts it now
        reason = None if by_model else made.reason_of(who)
        self.report.answered(task.name, reason, task.in_words)
        self.report.prompted(spend.prompt_tokens, spend.cached_tokens)
        if not by_model and (warning := self.report.warn_once()) is not None:
            log.warning("LLM %s", warning)
        return result

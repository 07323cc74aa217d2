"""What one thought spends, and why the model gave no usable answer (the gateway's own types)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from town.llm.usage import Budget, Hold


class Unusable(Exception):
    """The model gave no usable answer: the offline brain answers instead."""

    def __init__(self, detail: str, reason: str = "error", quiet: bool = False) -> None:
        super().__init__(detail)
        self.reason = reason  # the fallback's reason in the report (see town.llm.report)
        self.quiet = quiet  # the log has said why already: this fallback is logged at INFO


@runtime_checkable
class ExplainedBudget(Budget, Protocol):
    """A budget that can say which of its limits is spent (e.g. "500 of 500 calls today")."""

    def spent_reason(self) -> str | None: ...


@dataclass
class Spend:
    """One thought's spending, and what it holds of the budget until it is recorded."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    held: Hold = field(default_factory=Hold)

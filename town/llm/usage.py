"""What thinking costs: usage records and the daily budget the gateway respects."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class UsageRecorder(Protocol):
    """Told about every call the gateway answers (``calls`` is 0 for an offline answer)."""

    def record(
        self,
        task: str,
        resident: str | None,
        calls: int,
        prompt_tokens: int,
        completion_tokens: int,
        fallback: bool,
    ) -> None: ...


class Budget(Protocol):
    def exhausted(self) -> bool: ...


@dataclass
class UsageCount:
    """Totals for one task, one resident or the whole town."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    answers: int = 0
    fallbacks: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, calls: int, prompt_tokens: int, completion_tokens: int, fallback: bool) -> None:
        self.calls += calls
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.answers += 1
        self.fallbacks += int(fallback)


class UsageTally:
    """An in-memory :class:`UsageRecorder` with totals by task and by resident."""

    def __init__(self) -> None:
        self.total = UsageCount()
        self.by_task: dict[str, UsageCount] = {}
        self.by_resident: dict[str, UsageCount] = {}

    def record(
        self,
        task: str,
        resident: str | None,
        calls: int,
        prompt_tokens: int,
        completion_tokens: int,
        fallback: bool,
    ) -> None:
        counts = [self.total, self.by_task.setdefault(task, UsageCount())]
        if resident is not None:
            counts.append(self.by_resident.setdefault(resident, UsageCount()))
        for count in counts:
            count.add(calls, prompt_tokens, completion_tokens, fallback)

    @property
    def total_tokens(self) -> int:
        return self.total.total_tokens


class NullRecorder:
    """Records nothing."""

    def record(
        self,
        task: str,
        resident: str | None,
        calls: int,
        prompt_tokens: int,
        completion_tokens: int,
        fallback: bool,
    ) -> None:
        return None


class Unlimited:
    """A budget that is never spent."""

    def exhausted(self) -> bool:
        return False


class TokenBudget:
    """Spent once ``spent()`` reaches ``limit_tokens`` (``None``: no limit).

    ``spent`` is whatever counts today's tokens, e.g. ``lambda: tally.total_tokens`` or a query
    on the store for the town's daily total.
    """

    def __init__(self, limit_tokens: int | None, spent: Callable[[], int]) -> None:
        self.limit_tokens = limit_tokens
        self._spent = spent

    def exhausted(self) -> bool:
        return self.limit_tokens is not None and self._spent() >= self.limit_tokens

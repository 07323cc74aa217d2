"""What thinking costs: usage records and the daily budget the gateway respects."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


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


@runtime_checkable
class RoomyBudget(Budget, Protocol):
    """A budget that says how much is left (None: no limit of that kind)."""

    def left(self) -> int | None: ...

    def calls_left(self) -> int | None: ...


def worst_prompt_tokens(chars: int) -> int:
    """A prompt's tokens as a reservation counts them: generously (3 characters a token)."""
    return math.ceil(chars / 3)


@dataclass(frozen=True)
class Hold:
    """Tokens and calls held against a budget."""

    tokens: int = 0
    calls: int = 0

    def plus(self, other: Hold) -> Hold:
        return Hold(self.tokens + other.tokens, self.calls + other.calls)


class Holds:
    """What the calls in flight hold of a budget: each reserves its worst case before it is sent
    and holds what it spent until the usage recorder counts it, so calls made together never
    pass the budget (by more than a reply that outgrew its reservation)."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.held = Hold()

    def reserve(self, worst: Hold) -> bool:
        """Hold ``worst`` if the budget has room for it beside what is held; else False."""
        if isinstance(self.budget, RoomyBudget):
            tokens, calls = self.budget.left(), self.budget.calls_left()
            if tokens is not None and self.held.tokens + worst.tokens > tokens:
                return False
            if calls is not None and self.held.calls + worst.calls > calls:
                return False
        self.hold(worst)
        return True

    def hold(self, amount: Hold) -> None:
        self.held = self.held.plus(amount)

    def release(self, amount: Hold) -> None:
        self.held = Hold(self.held.tokens - amount.tokens, self.held.calls - amount.calls)


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

    def left(self) -> int | None:
        return None if self.limit_tokens is None else max(0, self.limit_tokens - self._spent())

    def calls_left(self) -> int | None:
        return None

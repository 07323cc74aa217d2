"""What thinking costs: what one thought spends, usage records and the daily budget the gateway
respects."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from town.llm.made import UNPARSEABLE, Unusable
from town.llm.replies import OVERRUN, Reply
from town.llm.structured import Message


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


@runtime_checkable
class ExplainedBudget(Budget, Protocol):
    """A budget that can say which of its limits is spent (e.g. "500 of 500 calls today")."""

    def spent_reason(self) -> str | None: ...


def worst_prompt_tokens(chars: int) -> int:
    """A prompt's tokens as a reservation counts them: generously (3 characters a token)."""
    return math.ceil(chars / 3)


@dataclass(frozen=True)
class Hold:
    """Tokens and calls held against a budget."""

    tokens: int = 0
    calls: int = 0


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
        self.held = Hold(self.held.tokens + amount.tokens, self.held.calls + amount.calls)

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


def estimate_tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def cut_at_cap(content: str, max_tokens: int) -> str:
    """A reply's text cut to about ``max_tokens`` tokens (4 characters a token), trailing
    blanks dropped."""
    return content[: 4 * max_tokens].rstrip()


@dataclass
class Spend:
    """One thought's spending, and what it holds of the budget until it is recorded (then
    :meth:`release`)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of the prompt tokens, those the server's prefix cache held
    held: list[tuple[Holds, Hold]] = field(default_factory=list)

    def keep(self, holds: Holds, amount: Hold) -> None:
        """Hold ``amount`` of ``holds``' budget until this spend is recorded."""
        holds.hold(amount)
        self.held.append((holds, amount))

    def release(self) -> None:
        """The spend is recorded (the budget counts it now): let go of what it held."""
        for holds, amount in self.held:
            holds.release(amount)
        self.held = []

    def count(
        self, reply: Reply, messages: list[Message], max_tokens: int
    ) -> tuple[str, int | None]:
        """Count the reply's tokens as served (the server's counts, else estimated from what
        was read); its text, and its length in tokens when it ran past ``max_tokens`` (else
        None).

        A reply longer than ``max_tokens`` (a server that ignores the cap) is cut at the cap for
        reading, and counted as long as it was: a stream is read no further than its cap
        (:func:`~town.llm.replies.worst_reply_tokens`), a whole body was served whole.
        Raises :class:`Unusable` for a body that is no chat completion, after counting the
        tokens the server said it used (none are estimated for it).
        """
        prompt, completion = reply.prompt_tokens, reply.completion_tokens
        if reply.problem is not None:
            self.prompt_tokens += prompt or 0
            self.completion_tokens += completion or 0
            raise Unusable(
                f"the server's reply was not a chat completion ({reply.problem})",
                UNPARSEABLE,
            )
        if prompt is None:
            prompt = estimate_tokens(sum(len(m["content"]) for m in messages))
        if completion is None:
            completion = estimate_tokens(len(reply.content))
        content, overrun = reply.content, None
        if estimate_tokens(len(content)) > OVERRUN * max_tokens:  # (a count: a tokenizer's)
            overrun = completion
            content = cut_at_cap(content, max_tokens)
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.cached_tokens += min(reply.cached_tokens, prompt)
        return content, overrun

    def count_cut(self, prompt_chars: int, received: str) -> None:
        """Count a call cut short, estimated: its prompt and the reply's text received."""
        self.prompt_tokens += estimate_tokens(prompt_chars)
        self.completion_tokens += estimate_tokens(len(received))


_SPENDING: ContextVar[Spend | None] = ContextVar("spending", default=None)


@contextlib.contextmanager
def spending(spend: Spend) -> Iterator[Spend]:
    """The thought made inside spends into ``spend`` (see :func:`current`)."""
    token = _SPENDING.set(spend)
    try:
        yield spend
    finally:
        _SPENDING.reset(token)


def current() -> Spend:
    """The spend of the thought being made here (a new one, for a brain called bare)."""
    return _SPENDING.get() or Spend()

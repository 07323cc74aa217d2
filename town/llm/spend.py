"""What one thought spends, and why the model gave no usable answer (the gateway's own types)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from town.llm import report as why
from town.llm.replies import OVERRUN, Reply
from town.llm.task import Message
from town.llm.usage import Budget, Hold, Holds


def estimate_tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def cut_at_cap(content: str, max_tokens: int) -> str:
    """A reply's text cut to about ``max_tokens`` tokens (4 characters a token), trailing
    blanks dropped."""
    return content[: 4 * max_tokens].rstrip()


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
                why.UNPARSEABLE,
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

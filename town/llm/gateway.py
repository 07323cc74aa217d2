"""The LLM gateway: the town's one way to ask a language model, never a crash.

Per thought: render the task's messages, build the task's schema for its inputs, ask
``chat.completions.create`` for structured JSON in the mode the server takes
(:mod:`town.llm.formats`), read the reply leniently and validate it with the task's result
model, repair once, and otherwise let the offline brain answer (counted by task and reason in
:attr:`LLMGateway.report`). The openai client retries; the gateway paces the server
(:mod:`town.llm.pacing`), reserves each call's worst case against the daily budget before sending,
and counts usage. The town's calls stream, so that a person's call can cut them short
(:mod:`town.llm.streamed`).
"""

from __future__ import annotations

import logging
import time
from typing import Any, TypeVar

import openai
from pydantic import BaseModel

from town.llm import advice, formats, slots, streamed, urgency
from town.llm import report as why
from town.llm.client import seconds_of
from town.llm.lenient import NoJSON
from town.llm.offline.brain import OfflineBrain
from town.llm.pacing import Pacer, WaitedTooLong
from town.llm.port import Brain
from town.llm.replies import Reply, problem_of
from town.llm.report import AnswerReport
from town.llm.shapes import max_tokens_for
from town.llm.spend import ExplainedBudget, Spend, Unusable
from town.llm.tasks import Message, SpeechTask, Task
from town.llm.usage import (
    Budget,
    Hold,
    Holds,
    NullRecorder,
    Unlimited,
    UsageRecorder,
    worst_prompt_tokens,
)

I = TypeVar("I", bound=BaseModel)  # noqa: E741 - the conventional name of an input type
R = TypeVar("R", bound=BaseModel)

log = logging.getLogger(__name__)

MODE_LLM = "llm"
MODE_BUDGET_SPENT = "offline (budget spent)"
MODE_KEY_REJECTED = "offline (API key rejected)"
MODE_MODEL_MISSING = "offline (model not found)"
FORMATS = formats.FORMATS
TIMEOUT_ROUNDS = 2
"""Rounds of the client's attempts a call gets when they time out (the pacer slows down between
them) before the offline brain answers; the server then rests for a timeout's length (calls
meanwhile are answered offline at once), so a hung server never stalls the town."""
PACE_SHARES = {"rate_importance": 0.2, "decompose": 0.5}
"""Tasks answered offline once a call would wait, or has waited, past this share of the tick's
interval (more urgent calls, a visitor's reply, go ahead): the town keeps its pace."""
_REPAIR = (
    "Your previous reply could not be used: {problem}. Reply again with only the corrected JSON "
    "object, matching the requested shape."
)


class LLMGateway:
    """A :class:`~town.llm.port.Brain` over an ``openai.AsyncOpenAI`` client (``open_client``),
    which retries on its own; ``concurrency`` is the most calls in flight (the pacer may allow
    fewer); ``max_tokens`` replaces each task's own (an experiment's fixed setting)."""

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        *,
        model: str,
        usage: UsageRecorder | None = None,
        budget: Budget | None = None,
        fallback: Brain | None = None,
        concurrency: int = 8,
        temperature: float | None = None,
        max_tokens: int | None = None,
        pace_s: float | None = None,
    ) -> None:
        self.name = f"llm:{model}"
        self.pace_s = pace_s  # the tick's interval to keep (None: always wait for the model)
        self.model = model
        self._client = client
        self._temperature = temperature
        self._max_tokens = max_tokens
        self._usage: UsageRecorder = usage if usage is not None else NullRecorder()
        self._budget: Budget = budget if budget is not None else Unlimited()
        self._fallback: Brain = fallback if fallback is not None else OfflineBrain()
        self.pacer = Pacer(concurrency, seconds_of(client.timeout))
        self.report = AnswerReport()
        self._format = 0  # the index in FORMATS of the response format asked for
        self._ignored = 0  # replies in a row without JSON in the current format
        self._holds = Holds(self._budget)
        self._disabled: str | None = None
        self._budget_noted = False
        self._rest_until = 0.0  # monotonic time until which a hung server is left alone
        self._said: set[str] = set()  # the warnings said (each once)

    @property
    def mode(self) -> str:
        """``"llm"``, or why residents use the offline brain (for ``status``)."""
        if self._disabled is not None:
            return self._disabled
        return MODE_BUDGET_SPENT if self._budget.exhausted() else MODE_LLM

    @property
    def budget(self) -> Budget:
        """The budget this gateway respects (for ``status``)."""
        return self._budget

    @property
    def response_format_kind(self) -> str:
        return FORMATS[self._format]

    async def run(self, task: Task[I, R], inputs: I, *, resident: str | None = None) -> R:
        spend = Spend()
        result: R | None = None
        reason: str | None = why.BUDGET
        if self._disabled is not None:
            reason = self._disabled.removeprefix("offline (").removesuffix(")")
        elif self._behind(task.name):
            reason = why.PACE
        elif self._usable():
            try:
                result = await self._think(task, inputs, spend)
            except Unusable as error:
                reason = error.reason
                if reason == why.BUDGET:
                    self._note_budget_spent(str(error))
                elif reason != why.PACE:  # (counted by task, as those sent offline at once)
                    log.log(
                        logging.INFO if error.quiet else logging.WARNING,
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
        fallback = result is None
        if result is None:
            result = await self._fallback.run(task, inputs, resident=resident)
        self._usage.record(
            task.name, resident, spend.calls, spend.prompt_tokens, spend.completion_tokens, fallback
        )
        self._holds.release(spend.held)  # recorded: the budget counts it now
        self.report.answered(task.name, reason if fallback else None)
        self.report.prompted(spend.prompt_tokens, spend.cached_tokens)
        if fallback and (warning := self.report.warn_once()) is not None:
            log.warning("LLM %s", warning)
        return result

    def _behind(self, task: str) -> bool:
        """Whether the calls ahead would make this one wait past its :meth:`patience`."""
        patience = self.patience(task)
        return patience is not None and self.pacer.expected_wait_s(urgency.of(task)) > patience

    def patience(self, task: str) -> float | None:
        """How long a call of ``task`` made now may wait for the server before the offline brain
        answers it, the town keeping its pace (None: as long as it takes): a share of the tick
        for ``PACE_SHARES``' tasks, a call's usual time for a reply to words to everyone."""
        if self.pace_s is None:
            return None
        if urgency.for_everyone():
            return self.pacer.typical_s
        share = PACE_SHARES.get(task)
        return None if share is None else share * self.pace_s

    def _usable(self) -> bool:
        if self._budget.exhausted():
            reason = None
            if isinstance(self._budget, ExplainedBudget):
                reason = self._budget.spent_reason()
            self._note_budget_spent(reason)
            return False
        return True

    def _note_budget_spent(self, reason: str | None) -> None:
        """Say once that the budget is spent (or has no room left for a call)."""
        if self._budget_noted:
            return
        self._budget_noted = True
        if reason is None:
            log.warning("LLM daily budget spent: residents now use the offline brain")
        else:
            log.warning(
                "LLM daily budget spent (%s): residents use the offline brain until 00:00 UTC",
                reason,
            )

    async def _think(self, task: Task[I, R], inputs: I, spend: Spend) -> R:
        if time.monotonic() < self._rest_until:
            resting = "the server did not answer lately; asking again soon"
            raise Unusable(resting, why.TIMEOUT, quiet=True)
        messages = task.render(inputs)
        if isinstance(task, SpeechTask):  # plain text, cleaned, or the offline brain's line
            said = await self._complete(task, {}, messages, spend)
            try:
                spoken: R = task.parse(inputs, said)
            except ValueError as error:
                raise Unusable(f"no usable speech: {error}", why.UNPARSEABLE) from None
            return spoken
        schema = task.schema_for(inputs)
        reply = await self._complete(task, schema, messages, spend)
        try:
            return self._parse(task, inputs, reply)
        except ValueError as error:
            problem = problem_of(error)
        log.info("LLM %s reply did not validate (%s); asking for a repair", task.name, problem)
        repair: list[Message] = [
            *messages,
            {"role": "assistant", "content": reply[:4000]},
            {"role": "user", "content": _REPAIR.format(problem=problem)},
        ]
        reply = await self._complete(task, schema, repair, spend)
        try:
            return self._parse(task, inputs, reply)
        except ValueError as error:
            raise Unusable(
                f"still invalid after a repair: {problem_of(error)}", why.UNPARSEABLE
            ) from None

    def _parse(self, task: Task[I, R], inputs: I, reply: str) -> R:
        """The reply read and checked; replies in a row holding no JSON at all mean the server
        ignores the format asked for, and the next one is used from then on."""
        kind = FORMATS[self._format]
        try:
            result = task.parse(inputs, reply)
        except NoJSON:
            self._ignored += 1
            if self._ignored >= formats.IGNORED_LIMIT and kind != FORMATS[-1]:
                self._downgrade(kind, "its replies ignore it")
            raise
        self._ignored = 0
        return result

    async def _complete(
        self, task: Task[I, R], schema: dict[str, Any], messages: list[Message], spend: Spend
    ) -> str:
        """The reply's text, after the client's retries; raises :class:`Unusable`."""
        speaking = isinstance(task, SpeechTask)
        if self._max_tokens is not None:
            max_tokens = self._max_tokens
        else:
            max_tokens = task.max_tokens if isinstance(task, SpeechTask) else max_tokens_for(schema)
        timeouts = cuts = 0
        while True:
            kind = formats.SPEECH if speaking else FORMATS[self._format]
            wire = formats.wire(messages, kind, schema)
            chars = sum(len(str(m.get("content", ""))) for m in wire)
            # the call's worst case is held against the budget before it is sent, so calls in
            # flight never pass it together; once back, what it spent is held until recorded
            worst = Hold(worst_prompt_tokens(chars) + max_tokens, 1)
            if not self._holds.reserve(worst):
                raise Unusable("the daily budget has no room for this call", why.BUDGET)
            if self._budget_noted:
                log.info("LLM budget available again: residents use the LLM")
                self._budget_noted = False
            before = (spend.calls, spend.prompt_tokens + spend.completion_tokens)
            try:
                cuttable = cuts < streamed.CUT_ROUNDS  # (then it is sent whole, left to end)
                reply = await self._send(task.name, schema, wire, kind, max_tokens, spend, cuttable)
                content, overrun = spend.count(reply, messages, max_tokens)
                if overrun is not None:
                    self._warn_once("overrun", advice.overrun(overrun, max_tokens))
                return content
            except openai.APIStatusError as error:
                if kind in FORMATS[:-1] and formats.rejects_format(error):
                    self._downgrade(kind, f"HTTP {error.status_code}: {formats.said(error)}")
                    continue
                raise self._status_error(error, spend) from None
            except openai.APITimeoutError:
                spend.calls += self._client.max_retries
                self.pacer.timed_out()
                timeouts += 1
                if timeouts < TIMEOUT_ROUNDS:
                    log.info(
                        "LLM %s call timed out; %d call(s) in flight from now, %.0f s timeout",
                        task.name,
                        int(self.pacer.limit),
                        self.pacer.timeout_s,
                    )
                    continue
                self._rest_until = time.monotonic() + self.pacer.timeout_s
                limit, timeout_s = int(self.pacer.limit), self.pacer.timeout_s
                self._warn_once("timeouts", advice.timeouts(limit, timeout_s))
                raise Unusable("timed out, gave up after the retries", why.TIMEOUT) from None
            except openai.APIConnectionError:
                spend.calls += self._client.max_retries
                raise Unusable("no reply, gave up after the retries", why.NO_REPLY) from None
            except streamed.Interrupted as cut:  # sent again
                spend.count_cut(chars, cut.received)
                if cut.by_server:
                    self.pacer.interrupted()
                cuts += 1
                continue
            except WaitedTooLong as error:  # never sent: the town goes on without it
                raise Unusable(f"behind the town's pace ({error})", why.PACE, quiet=True) from None
            finally:
                self._holds.release(worst)
                spent = Hold(
                    spend.prompt_tokens + spend.completion_tokens - before[1],
                    spend.calls - before[0],
                )
                self._holds.hold(spent)
                spend.held = spend.held.plus(spent)

    def _status_error(self, error: openai.APIStatusError, spend: Spend) -> Unusable:
        status = error.status_code
        if isinstance(error, openai.AuthenticationError | openai.PermissionDeniedError):
            self._disable(MODE_KEY_REJECTED, status)
            return Unusable(f"API key rejected ({status})", "API key rejected")
        if isinstance(error, openai.NotFoundError):
            self._disable(MODE_MODEL_MISSING, 404)
            return Unusable("model not found (404)", "model not found")
        if isinstance(error, openai.RateLimitError) and error.code == "insufficient_quota":
            return Unusable("the account has no quota left (429)", "HTTP 429")
        if advice.CONTEXT_FULL.search(error.message):
            quiet = not self._warn_once("context", advice.context_full(status, error.message))
            return Unusable(
                f"the prompt exceeds the context window ({status})", "context full", quiet
            )
        if status >= 500 or status in (408, 409, 429):
            spend.calls += self._client.max_retries
            return Unusable(f"HTTP {status}, gave up after the retries", f"HTTP {status}")
        return Unusable(f"request rejected ({status}): {error.message[:200]}", f"HTTP {status}")

    async def _send(
        self,
        name: str,
        schema: dict[str, Any],
        wire: Any,
        kind: str,
        max_tokens: int,
        spend: Spend,
        cuttable: bool,
    ) -> Reply:
        """The completion, read (a town's call streamed, ``cuttable``: see
        :mod:`town.llm.streamed`); the client's errors for a status it did not retry away."""
        log.debug("LLM %s: %d messages, %s mode", name, len(wire), kind)
        await slots.ask_once(self.pacer, self._client)
        patience = self.patience(name)
        urgent = urgency.sending(name)  # a visitor's first reply goes beside the limit
        at_once, person = urgent == urgency.VISITOR, urgent <= urgency.PERSON
        request: dict[str, Any] = {
            "model": self.model,
            "messages": wire,
            "response_format": formats.response_format(kind, name, schema),
            "temperature": self._temperature if self._temperature is not None else openai.omit,
            "max_tokens": max_tokens,
            "stop": formats.stop(kind),
            "timeout": self.pacer.timeout_s,
        }
        cuttable = cuttable and not person  # a town's call streams: a person's may cut it
        async with self.pacer.slot(
            urgent, patience, at_once=at_once, person=person, cuttable=cuttable
        ) as call:
            spend.calls += 1
            began = time.monotonic()
            reply, retries = await streamed.send(self._client, request, call)
            self.pacer.answered(time.monotonic() - began, call.sent_with)
        spend.calls += retries
        return reply

    def _downgrade(self, kind: str, because: str) -> None:
        if FORMATS[self._format] == kind:  # not already done by a call beside this one
            self._format += 1
            self._ignored = 0
            chosen = FORMATS[self._format]
            log.warning(
                "LLM server does not take %s response formats (%s); using %s mode from now on: %s",
                kind,
                because,
                chosen,
                formats.WHY[chosen],
            )

    def _warn_once(self, what: str, warning: str) -> bool:
        """Log ``warning`` if nothing about ``what`` was said yet; whether it was said now."""
        if what in self._said:
            return False
        self._said.add(what)
        log.warning("%s", warning)
        return True

    def _disable(self, mode: str, status: int) -> None:
        """Stop asking the model for good, saying once which setting to fix (never the key)."""
        if self._disabled is None:
            self._disabled = mode
            log.error("%s", advice.refused(status, self.model))

"""The LLM gateway: the model's answer to a thought, or :class:`~town.llm.made.Unusable` with the
reason (the fallback answers then). Per thought: the task's messages and schema for its inputs,
``chat.completions.create`` in the structured-output mode the server takes
(:mod:`town.llm.structured`), the reply read leniently and validated, one repair; each call
waits for the server's pacer, holds its worst case of the budget and spends into the thought's
:class:`~town.llm.usage.Spend`.
"""

from __future__ import annotations

import logging
import time
from typing import Any, TypeVar

import openai
from pydantic import BaseModel

from town.llm import advice, made, replies, structured, urgency
from town.llm.made import Unusable
from town.llm.pacing import Pacer, WaitedTooLong
from town.llm.replies import Reply, problem_of, worst_reply_tokens
from town.llm.speech import SpeechTask
from town.llm.structured import Message, NoJSON, max_tokens_for
from town.llm.task import Task
from town.llm.usage import (
    Budget,
    ExplainedBudget,
    Hold,
    Holds,
    Spend,
    worst_prompt_tokens,
)
from town.llm.usage import current as spending_now

I = TypeVar("I", bound=BaseModel)  # noqa: E741 - the conventional name of an input type
R = TypeVar("R", bound=BaseModel)

log = logging.getLogger(__name__)

MODE_LLM = "llm"
MODE_BUDGET_SPENT = "offline (budget spent)"
MODE_KEY_REJECTED = "offline (API key rejected)"
MODE_MODEL_MISSING = "offline (model not found)"
FORMATS = structured.FORMATS
TIMEOUT_ROUNDS = 2
"""Rounds of the client's attempts a call gets when they time out (the pacer slows down between
them) before the offline brain answers; the server then rests for a timeout's length (calls
meanwhile are answered offline at once), so a hung server never stalls the town."""
_REPAIR = (
    "Your previous reply could not be used: {problem}. Reply again with only the corrected JSON "
    "object, matching the requested shape."
)


class LLMGateway:
    """The model's brain over an ``openai.AsyncOpenAI`` client (``open_client``, which retries
    on its own); ``max_tokens`` replaces each task's own (an experiment's fixed setting); with
    ``priority``, each call carries its urgency as vLLM's ``priority`` field."""

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        *,
        model: str,
        pacer: Pacer,
        holds: Holds,
        temperature: float | None = None,
        max_tokens: int | None = None,
        pace_s: float | None = None,
        priority: bool = False,
    ) -> None:
        self.name = f"llm:{model}"
        self._priority = priority  # send each call's urgency as vLLM's ``priority``
        self.pace_s = pace_s  # the tick's interval to keep (None: always wait for the model)
        self.model = model
        self._client = client
        self._temperature = temperature
        self._max_tokens = max_tokens
        self.pacer = pacer
        self._holds = holds
        self._format = 0  # the index in FORMATS of the response format asked for
        self._ignored = 0  # replies in a row without JSON in the current format
        self._disabled: str | None = None
        self._budget_noted = False
        self._rest_until = 0.0  # monotonic time until which a hung server is left alone
        self._said: set[str] = set()  # the warnings said (each once)

    @property
    def mode(self) -> str:
        """``"llm"``, or why residents use the offline brain (for ``status``)."""
        if self._disabled is not None:
            return self._disabled
        return MODE_BUDGET_SPENT if self.budget.exhausted() else MODE_LLM

    @property
    def budget(self) -> Budget:
        """The budget this gateway respects (for ``status``)."""
        return self._holds.budget

    @property
    def response_format_kind(self) -> str:
        return FORMATS[self._format]

    async def run(self, task: Task[I, R], inputs: I, *, resident: str | None = None) -> R:
        """The model's answer, stamped with its name; :class:`Unusable` with the reason when it
        has none (spent: the budget; behind: the town's pace; the server's failure)."""
        if self._disabled is not None:
            reason = self._disabled.removeprefix("offline (").removesuffix(")")
            raise Unusable(self._disabled, reason, quiet=True)
        if self._behind(task):
            raise Unusable("behind the town's pace", made.PACE, quiet=True)
        if not self._usable():
            raise Unusable("the daily budget is spent", made.BUDGET, quiet=True)
        result = await self._think(task, inputs, spending_now())
        return made.stamp(result, self.model)

    def _behind(self, task: Task[Any, Any]) -> bool:
        """Whether the calls ahead would make this one wait past its :meth:`patience`."""
        patience = self.patience(task)
        waited = self.pacer.expected_wait_s(urgency.of(task.urgency))
        return patience is not None and waited > patience

    def patience(self, task: Task[Any, Any]) -> float | None:
        """How long a call of ``task`` made now may wait for the server before the offline brain
        answers it, the town keeping its pace (None: as long as it takes): the task's share of
        the tick (``Task.pace_share``), a call's usual time for a reply to words to everyone."""
        if self.pace_s is None:
            return None
        if urgency.for_everyone():
            return self.pacer.typical_s
        share = task.pace_share
        return None if share is None else share * self.pace_s

    def _usable(self) -> bool:
        """Whether the budget is not spent (saying once when it is)."""
        budget = self.budget
        if not budget.exhausted():
            return True
        if not self._budget_noted:
            self._budget_noted = True
            if isinstance(budget, ExplainedBudget) and (reason := budget.spent_reason()):
                log.warning(
                    "LLM daily budget spent (%s): residents use the offline brain until 00:00 UTC",
                    reason,
                )
            else:
                log.warning("LLM daily budget spent: residents now use the offline brain")
        return False

    async def _think(self, task: Task[I, R], inputs: I, spend: Spend) -> R:
        if time.monotonic() < self._rest_until:
            resting = "the server did not answer lately; asking again soon"
            raise Unusable(resting, made.TIMEOUT, quiet=True)
        messages = task.render(inputs)
        if isinstance(task, SpeechTask):  # plain text, cleaned, or the offline brain's line
            said = await self._complete(task, {}, messages, spend)
            try:
                spoken: R = task.parse(inputs, said)
            except ValueError as error:
                raise Unusable(f"no usable speech: {error}", made.UNPARSEABLE) from None
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
                f"still invalid after a repair: {problem_of(error)}", made.UNPARSEABLE
            ) from None

    def _parse(self, task: Task[I, R], inputs: I, reply: str) -> R:
        """The reply read and checked; replies in a row holding no JSON at all mean the server
        ignores the format asked for, and the next one is used from then on."""
        kind = FORMATS[self._format]
        try:
            result = task.parse(inputs, reply)
        except NoJSON:
            self._ignored += 1
            if self._ignored >= structured.IGNORED_LIMIT and kind != FORMATS[-1]:
                self._downgrade(kind, "its replies ignore it")
            raise
        self._ignored = 0
        return result

    async def _complete(
        self, task: Task[I, R], schema: dict[str, Any], messages: list[Message], spend: Spend
    ) -> str:
        """The reply's text, after the client's retries; raises :class:`~town.llm.made.Unusable`."""
        speaking = isinstance(task, SpeechTask)
        if self._max_tokens is not None:
            max_tokens = self._max_tokens
        else:
            max_tokens = task.max_tokens if isinstance(task, SpeechTask) else max_tokens_for(schema)
        timeouts = cuts = 0
        while True:
            kind = structured.SPEECH if speaking else FORMATS[self._format]
            wire = structured.wire(messages, kind, schema)
            chars = sum(len(str(m.get("content", ""))) for m in wire)
            # the call's worst case is held against the budget before it is sent, so calls in
            # flight never pass it together; once back, what it spent is held until recorded
            worst = Hold(worst_prompt_tokens(chars) + worst_reply_tokens(max_tokens), 1)
            if not self._holds.reserve(worst):
                raise Unusable("the daily budget has no room for this call", made.BUDGET)
            if self._budget_noted:
                log.info("LLM budget available again: residents use the LLM")
                self._budget_noted = False
            before = (spend.calls, spend.prompt_tokens + spend.completion_tokens)
            try:
                streams = cuts < replies.CUT_ROUNDS  # (then it is sent whole, left to end)
                reply = await self._send(task, schema, wire, kind, max_tokens, spend, streams)
                content, overrun = spend.count(reply, messages, max_tokens)
                if overrun is not None:
                    self._warn_once("overrun", advice.overrun(overrun, max_tokens))
                return content
            except openai.APIStatusError as error:
                if kind in FORMATS[:-1] and structured.rejects_format(error):
                    self._downgrade(kind, f"HTTP {error.status_code}: {structured.said(error)}")
                    continue
                raise self._status_error(error, spend) from None
            except openai.APITimeoutError:
                spend.calls += self._client.max_retries
                self.pacer.timed_out()
                timeouts += 1
                if timeouts < TIMEOUT_ROUNDS:
                    log.info(
                        "LLM %s call timed out; %.0f s timeout from now",
                        task.name,
                        self.pacer.timeout_s,
                    )
                    continue
                self._rest_until = time.monotonic() + self.pacer.timeout_s
                slots_, timeout_s = self.pacer.slots, self.pacer.timeout_s
                self._warn_once("timeouts", advice.timeouts(slots_, timeout_s))
                raise Unusable("timed out, gave up after the retries", made.TIMEOUT) from None
            except openai.APIConnectionError:
                spend.calls += self._client.max_retries
                raise Unusable("no reply, gave up after the retries", made.NO_REPLY) from None
            except replies.Interrupted as cut:  # sent again
                spend.count_cut(chars, cut.received)
                if cut.by_server:
                    self.pacer.interrupted()
                cuts += 1
                continue
            except WaitedTooLong as error:  # never sent: the town goes on without it
                raise Unusable(f"behind the town's pace ({error})", made.PACE, quiet=True) from None
            finally:
                self._holds.release(worst)
                spent = Hold(
                    spend.prompt_tokens + spend.completion_tokens - before[1],
                    spend.calls - before[0],
                )
                spend.keep(self._holds, spent)

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
        task: Task[Any, Any],
        schema: dict[str, Any],
        wire: Any,
        kind: str,
        max_tokens: int,
        spend: Spend,
        streams: bool,
    ) -> Reply:
        """The completion, read (streamed unless not ``streams``; a town's streamed call can be
        cut: see :mod:`town.llm.replies`); the client's errors for a status it did not retry
        away."""
        name = task.name
        log.debug("LLM %s: %d messages, %s mode", name, len(wire), kind)
        await self.pacer.ask_once(self._client)
        patience = self.patience(task)
        urgent = urgency.sending(task.urgency)
        person = urgent <= urgency.PERSON
        request: dict[str, Any] = {
            "model": self.model,
            "messages": wire,
            "response_format": structured.response_format(kind, name, schema),
            "temperature": self._temperature if self._temperature is not None else openai.omit,
            "max_tokens": max_tokens,
            "stop": structured.stop(kind),
            "timeout": self.pacer.timeout_s,
        }
        if self._priority:  # vLLM's --scheduling-policy priority: lower goes first, as ours
            request["extra_body"] = {"priority": urgent}
        streams = streams and self.pacer.streams  # (a server that does not is read whole)
        cuttable = streams and not person  # a town's call, so that a person's may cut it
        async with self.pacer.slot(urgent, patience, person=person, cuttable=cuttable) as call:
            spend.calls += 1
            began = time.monotonic()
            reply, retries = await replies.send(self._client, request, call, self.pacer, streams)
            self.pacer.answered(time.monotonic() - began)
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
                structured.WHY[chosen],
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

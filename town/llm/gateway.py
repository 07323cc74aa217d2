"""The LLM gateway: the town's one way to ask a language model, never a crash.

Per thought: render the task's messages, ask for structured JSON (``json_schema``, or
``json_object`` once a server has rejected that), validate with the task's result model, repair
once, and otherwise let the offline brain answer. Retries, the concurrency cap, usage accounting
and the daily budget all live here.

Requests go through the openai client's low-level ``post`` (its documented way to make any
request): the client's base URL, auth, headers, timeouts and exception classes, without its
per-call transform of the parameters and pydantic parsing of the reply (together about 0.8 ms
of CPU a call, 40% of a call's cost against a local server). The gateway reads the few fields
it needs from the reply's JSON itself; a body that is no chat completion is an unusable reply.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar, runtime_checkable

import openai
from pydantic import BaseModel

from town.llm.offline import OfflineBrain
from town.llm.port import Brain
from town.llm.quiet import QuietWatch
from town.llm.retry import RetryPolicy
from town.llm.tasks import Message, Task
from town.llm.usage import Budget, NullRecorder, Unlimited, UsageRecorder

I = TypeVar("I", bound=BaseModel)  # noqa: E741 - the conventional name of an input type
R = TypeVar("R", bound=BaseModel)

log = logging.getLogger(__name__)

MODE_LLM = "llm"
MODE_BUDGET_SPENT = "offline (budget spent)"
MODE_KEY_REJECTED = "offline (API key rejected)"
MODE_MODEL_MISSING = "offline (model not found)"
_REPAIR = (
    "Your previous reply could not be used: {problem}. Reply again with only the corrected JSON "
    "object, matching the requested shape."
)


# The settings a deployment fixes when the server rejects the key or the model.
API_KEY_SETTING = "BOTTOWN_LLM_API_KEY"
MODEL_SETTING = "BOTTOWN_LLM_MODEL"
BASE_URL_SETTING = "BOTTOWN_LLM_BASE_URL"


class _Unusable(Exception):
    """The model gave no usable answer: the offline brain answers instead."""


@dataclass(frozen=True, slots=True)
class _Reply:
    """What the gateway reads from the body of a ``/chat/completions`` reply."""

    content: str
    prompt_tokens: int | None  # the server's counts; None when it gave none
    completion_tokens: int | None
    problem: str | None = None  # why the body is no chat completion (content is then "")


def _count(usage: object, key: str) -> int | None:
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _read_reply(raw: bytes) -> _Reply:
    """The first choice's text and the usage, or the reason the body is no chat completion."""
    try:
        body = json.loads(raw)
    except ValueError:  # not JSON, or not UTF-8
        return _Reply("", None, None, "not JSON")
    if not isinstance(body, dict):
        return _Reply("", None, None, "not a JSON object")
    usage = body.get("usage")
    prompt, completion = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return _Reply("", prompt, completion, "no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        return _Reply("", prompt, completion, "no message")
    content = message.get("content")
    if content is None:
        return _Reply("", prompt, completion)
    if not isinstance(content, str):
        return _Reply("", prompt, completion, "the message's content is not text")
    return _Reply(content, prompt, completion)


@runtime_checkable
class ExplainedBudget(Budget, Protocol):
    """A budget that can say which of its limits is spent (e.g. "500 of 500 calls today")."""

    def spent_reason(self) -> str | None: ...


@dataclass
class _Spend:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


def estimate_tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def _problem(error: ValueError) -> str:
    errors = getattr(error, "errors", None)
    if callable(errors):
        found = [
            f"{'.'.join(str(p) for p in e['loc']) or 'reply'}: {e['msg']}"
            for e in errors(include_url=False, include_input=False)[:5]
        ]
        return "; ".join(found)
    return str(error)[:300]


def _rejects_json_schema(error: openai.BadRequestError) -> bool:
    text = f"{error.message} {error.param} {error.body}".lower()
    return "response_format" in text or "json_schema" in text


class LLMGateway:
    """A :class:`~town.llm.port.Brain` over an ``openai.AsyncOpenAI`` client.

    Build the client with ``max_retries=0`` so that this gateway's retry policy applies.
    ``max_attempts`` is a shortcut for ``retry=RetryPolicy(max_attempts=...)``; ``sleep`` and
    ``rng`` (backoff jitter) are there to be injected by tests. ``on_quiet`` is told when the
    event loop only waits for replies, and for how long at least (``town/llm/quiet.py``).
    """

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        *,
        model: str,
        usage: UsageRecorder | None = None,
        budget: Budget | None = None,
        fallback: Brain | None = None,
        concurrency: int = 8,
        retry: RetryPolicy | None = None,
        max_attempts: int | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
        on_quiet: Callable[[float], None] | None = None,
    ) -> None:
        self.name = f"llm:{model}"
        self.model = model
        self._client = client
        self._retry = retry if retry is not None else RetryPolicy()
        if max_attempts is not None:
            self._retry = replace(self._retry, max_attempts=max_attempts)
        self._temperature = temperature
        self._max_tokens = max_tokens
        self._usage: UsageRecorder = usage if usage is not None else NullRecorder()
        self._budget: Budget = budget if budget is not None else Unlimited()
        self._fallback: Brain = fallback if fallback is not None else OfflineBrain()
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self._quiet = QuietWatch(on_quiet)
        self._json_schema = True
        self._disabled: str | None = None
        self._budget_noted = False

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
        return "json_schema" if self._json_schema else "json_object"

    async def run(self, task: Task[I, R], inputs: I, *, resident: str | None = None) -> R:
        spend = _Spend()
        result: R | None = None
        if self._usable():
            try:
                result = await self._think(task, inputs, spend)
            except _Unusable as reason:
                log.warning(
                    "LLM gave no usable %s answer (%s); the offline brain answers",
                    task.name,
                    reason,
                )
            except Exception as error:  # never raise into the town
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
        return result

    def _usable(self) -> bool:
        if self._disabled is not None:
            return False
        if self._budget.exhausted():
            if not self._budget_noted:
                self._budget_noted = True
                reason = None
                if isinstance(self._budget, ExplainedBudget):
                    reason = self._budget.spent_reason()
                if reason is None:
                    log.warning("LLM daily budget spent: residents now use the offline brain")
                else:
                    log.warning(
                        "LLM daily budget spent (%s): residents use the offline brain until "
                        "00:00 UTC",
                        reason,
                    )
            return False
        if self._budget_noted:
            log.info("LLM budget available again: residents use the LLM")
            self._budget_noted = False
        return True

    async def _think(self, task: Task[I, R], inputs: I, spend: _Spend) -> R:
        messages = task.render(inputs)
        reply = await self._complete(task, messages, spend)
        try:
            return task.parse(inputs, reply)
        except ValueError as error:
            problem = _problem(error)
        log.info("LLM %s reply did not validate (%s); asking for a repair", task.name, problem)
        repair: list[Message] = [
            *messages,
            {"role": "assistant", "content": reply},
            {"role": "user", "content": _REPAIR.format(problem=problem)},
        ]
        reply = await self._complete(task, repair, spend)
        try:
            return task.parse(inputs, reply)
        except ValueError as error:
            raise _Unusable(f"still invalid after a repair: {_problem(error)}") from None

    async def _complete(self, task: Task[I, R], messages: list[Message], spend: _Spend) -> str:
        """The reply's text, after retries; raises :class:`_Unusable`."""
        policy = self._retry
        attempt = 0
        while True:
            schema_mode = self._json_schema
            attempt += 1
            spend.calls += 1
            try:
                raw = await self._send(task, messages, schema_mode)
            except openai.BadRequestError as error:
                if schema_mode and _rejects_json_schema(error):
                    self._use_json_object()
                    attempt -= 1  # the downgrade uses up no attempt
                    continue
                raise _Unusable(f"request rejected (400): {error.message[:200]}") from None
            except (openai.AuthenticationError, openai.PermissionDeniedError) as error:
                self._disable(MODE_KEY_REJECTED, error.status_code)
                raise _Unusable(f"API key rejected ({error.status_code})") from None
            except openai.NotFoundError:
                self._disable(MODE_MODEL_MISSING, 404)
                raise _Unusable("model not found (404)") from None
            except openai.RateLimitError as error:
                if error.code == "insufficient_quota":
                    raise _Unusable("the account has no quota left (429)") from None
                wait = policy.retry_after(error.response.headers)
                reason = "rate limited (429)"
                if wait is None:
                    wait = policy.backoff(attempt, self._rng)
            except openai.APIStatusError as error:
                if error.status_code < 500 and error.status_code not in (408, 409):
                    raise _Unusable(f"HTTP {error.status_code}") from None
                wait, reason = policy.backoff(attempt, self._rng), f"HTTP {error.status_code}"
            except openai.APITimeoutError:
                wait, reason = policy.backoff(attempt, self._rng), "timed out"
            except openai.APIConnectionError:
                wait, reason = policy.backoff(attempt, self._rng), "connection failed"
            else:
                return self._account(_read_reply(raw), messages, spend)
            if attempt >= policy.max_attempts:
                raise _Unusable(f"{reason}, gave up after {attempt} attempts")
            log.info(
                "LLM %s %s; retrying in %.2f s (attempt %d of %d)",
                task.name,
                reason,
                wait,
                attempt + 1,
                policy.max_attempts,
            )
            await self._sleep(wait)

    async def _send(self, task: Task[I, R], messages: list[Message], schema_mode: bool) -> bytes:
        """The raw body of a 2xx reply; other statuses raise the openai client's errors."""
        response_format: dict[str, Any]
        if schema_mode:
            response_format = {
                "type": "json_schema",
                "json_schema": {"name": task.name, "schema": task.json_schema(), "strict": False},
            }
        else:
            response_format = {"type": "json_object"}
        wire = self._wire(task, messages, schema_mode)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire,
            "response_format": response_format,
        }
        if self._temperature is not None:
            body["temperature"] = self._temperature
        if self._max_tokens is not None:
            body["max_tokens"] = self._max_tokens
        log.debug(
            "LLM %s: %d messages, %d chars",
            task.name,
            len(wire),
            sum(len(m["content"]) for m in messages),
        )
        async with self._slots:
            with self._quiet.flying():
                return await self._client.post(
                    "/chat/completions",
                    body=body,
                    cast_to=bytes,
                    options={"security": {"bearer_auth": True}},  # as chat.completions.create
                )

    @staticmethod
    def _wire(task: Task[I, R], messages: list[Message], schema_mode: bool) -> list[dict[str, str]]:
        wire: list[dict[str, str]] = []
        for message in messages:
            content = message["content"]
            role = message["role"]
            if role == "system" and not schema_mode:
                schema = json.dumps(task.json_schema(), ensure_ascii=False)
                content = f"{content}\n\nThe JSON object must match this JSON schema:\n{schema}"
            elif role not in ("system", "assistant"):
                role = "user"
            wire.append({"role": role, "content": content})
        return wire

    @staticmethod
    def _account(reply: _Reply, messages: list[Message], spend: _Spend) -> str:
        """Count the reply's tokens (the server's, else estimated) and return its text.

        Raises :class:`_Unusable` for a body that is no chat completion, after counting the
        tokens the server said it used (none are estimated for it).
        """
        prompt, completion = reply.prompt_tokens, reply.completion_tokens
        if reply.problem is not None:
            spend.prompt_tokens += prompt or 0
            spend.completion_tokens += completion or 0
            raise _Unusable(f"the server's reply was not a chat completion ({reply.problem})")
        if prompt is None:
            prompt = estimate_tokens(sum(len(m["content"]) for m in messages))
        if completion is None:
            completion = estimate_tokens(len(reply.content))
        spend.prompt_tokens += prompt
        spend.completion_tokens += completion
        return reply.content

    def _use_json_object(self) -> None:
        if self._json_schema:
            self._json_schema = False
            log.warning(
                "LLM server does not accept json_schema response formats; "
                "using json_object mode from now on"
            )

    def _disable(self, mode: str, status: int) -> None:
        """Stop asking the model for good, saying once which setting to fix (never the key)."""
        if self._disabled is not None:
            return
        self._disabled = mode
        if status == 401:
            log.error(
                "LLM rejected the API key (401): set %s to a valid key; "
                "residents now use the offline brain",
                API_KEY_SETTING,
            )
        elif status == 403:
            log.error(
                "LLM refused access (403) to model %r: check that %s may use it, or set "
                "%s; residents now use the offline brain",
                self.model,
                API_KEY_SETTING,
                MODEL_SETTING,
            )
        else:
            log.error(
                "LLM model %r not found (%d): set %s to a model this server offers "
                "(and check %s ends in /v1); residents now use the offline brain",
                self.model,
                status,
                MODEL_SETTING,
                BASE_URL_SETTING,
            )

"""The LLM gateway: the town's one way to ask a language model, never a crash.

Per thought: render the task's messages, ask ``chat.completions.create`` for structured JSON
(``json_schema``, or ``json_object`` once a server has rejected that), validate with the task's
result model, repair once, and otherwise let the offline brain answer. The openai client retries
and times out (``open_client``); the concurrency cap, usage accounting and the daily budget live
here.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from openai.types.chat.completion_create_params import ResponseFormat
from pydantic import BaseModel

from town.llm.offline.brain import OfflineBrain
from town.llm.port import Brain
from town.llm.tasks import Message, Task
from town.llm.usage import Budget, NullRecorder, Unlimited, UsageRecorder

I = TypeVar("I", bound=BaseModel)  # noqa: E741 - the conventional name of an input type
R = TypeVar("R", bound=BaseModel)

log = logging.getLogger(__name__)

MODE_LLM = "llm"
MODE_BUDGET_SPENT = "offline (budget spent)"
MODE_KEY_REJECTED = "offline (API key rejected)"
MODE_MODEL_MISSING = "offline (model not found)"
FORMATS = ("json_schema", "json_object")
"""The response formats asked for, most structured first: once a server rejects one (a 400
about ``response_format``), the next is asked for from then on."""
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
    """What the gateway reads from a chat completion."""

    content: str
    prompt_tokens: int | None  # the server's counts; None when it gave none
    completion_tokens: int | None
    problem: str | None = None  # why the body is no chat completion (content is then "")


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _read_reply(completion: object) -> _Reply:
    """The first choice's text and the usage, or the reason the reply is no chat completion.

    The client builds a :class:`ChatCompletion` from any JSON object without validating it (a
    missing field is None), hands back other JSON as it is and a body that is not JSON as text.
    """
    if not isinstance(completion, ChatCompletion):
        return _Reply(
            "", None, None, "not JSON" if isinstance(completion, str) else "not a JSON object"
        )
    usage = completion.usage
    prompt = _count(usage.prompt_tokens) if usage else None
    done = _count(usage.completion_tokens) if usage else None
    if not completion.choices:
        return _Reply("", prompt, done, "no choices")
    message = completion.choices[0].message
    if message is None:
        return _Reply("", prompt, done, "no message")
    content: object = message.content
    if content is None:
        return _Reply("", prompt, done)
    if not isinstance(content, str):
        return _Reply("", prompt, done, "the message's content is not text")
    return _Reply(content, prompt, done)


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


def _rejects_format(error: openai.BadRequestError, kind: str) -> bool:
    text = f"{error.message} {error.param} {error.body}".lower()
    return "response_format" in text or kind in text


class LLMGateway:
    """A :class:`~town.llm.port.Brain` over an ``openai.AsyncOpenAI`` client (``open_client``),
    which retries and times out on its own; ``concurrency`` caps the calls in flight."""

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
    ) -> None:
        self.name = f"llm:{model}"
        self.model = model
        self._client = client
        self._temperature = temperature
        self._max_tokens = max_tokens
        self._usage: UsageRecorder = usage if usage is not None else NullRecorder()
        self._budget: Budget = budget if budget is not None else Unlimited()
        self._fallback: Brain = fallback if fallback is not None else OfflineBrain()
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self._format = 0  # the index in FORMATS of the response format asked for
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
        return FORMATS[self._format]

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
        """The reply's text, after the client's retries; raises :class:`_Unusable`."""
        while True:
            kind = FORMATS[self._format]
            spend.calls += 1
            try:
                return self._account(await self._send(task, messages, kind, spend), messages, spend)
            except openai.BadRequestError as error:
                if kind != FORMATS[-1] and _rejects_format(error, kind):
                    self._downgrade(kind)
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
                spend.calls += self._client.max_retries
                raise _Unusable("rate limited (429), gave up after the retries") from None
            except openai.APIStatusError as error:
                if error.status_code >= 500 or error.status_code in (408, 409):
                    spend.calls += self._client.max_retries
                raise _Unusable(f"HTTP {error.status_code}") from None
            except openai.APIConnectionError as error:  # a timeout too
                spend.calls += self._client.max_retries
                problem = "timed out" if isinstance(error, openai.APITimeoutError) else "no reply"
                raise _Unusable(f"{problem}, gave up after the retries") from None

    async def _send(
        self, task: Task[I, R], messages: list[Message], kind: str, spend: _Spend
    ) -> _Reply:
        """The completion, read; the client's errors for a status it did not retry away."""
        response_format: ResponseFormat
        if kind == "json_schema":
            response_format = {
                "type": "json_schema",
                "json_schema": {"name": task.name, "schema": task.json_schema(), "strict": False},
            }
        else:
            response_format = {"type": "json_object"}
        wire = self._wire(task, messages, kind)
        log.debug("LLM %s: %d messages", task.name, len(wire))
        async with self._slots:
            raw = await self._client.chat.completions.with_raw_response.create(
                model=self.model,
                messages=wire,
                response_format=response_format,
                temperature=self._temperature if self._temperature is not None else openai.omit,
                max_tokens=self._max_tokens if self._max_tokens is not None else openai.omit,
            )
        spend.calls += raw.retries_taken
        try:
            return _read_reply(raw.parse())
        except ValueError:  # the body is not JSON (or not UTF-8)
            return _Reply("", None, None, "not JSON")

    @staticmethod
    def _wire(
        task: Task[I, R], messages: list[Message], kind: str
    ) -> list[ChatCompletionMessageParam]:
        wire: list[ChatCompletionMessageParam] = []
        for message in messages:
            content, role = message["content"], message["role"]
            if role == "system":
                if kind != "json_schema":
                    schema = json.dumps(task.json_schema(), ensure_ascii=False)
                    content = f"{content}\n\nThe JSON object must match this JSON schema:\n{schema}"
                wire.append({"role": "system", "content": content})
            elif role == "assistant":
                wire.append({"role": "assistant", "content": content})
            else:
                wire.append({"role": "user", "content": content})
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

    def _downgrade(self, kind: str) -> None:
        if FORMATS[self._format] == kind:  # not already done by a call beside this one
            self._format += 1
            log.warning(
                "LLM server does not accept %s response formats; using %s mode from now on",
                kind,
                FORMATS[self._format],
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

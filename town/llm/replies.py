"""What the gateway reads from a server's answer to a chat completion request, and how.

Every call streams, read no further than its cap (:func:`worst_reply_tokens`); a town's call
can be cut for a person's (:meth:`town.llm.pacing.Pacer.slot`) or ended by the server, and is
sent again, whole after ``CUT_ROUNDS`` cuts; a server that answers a stream with a whole body is
read whole from then on (docs/llm.md, "A person's call cuts a town call short").
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from town.llm.pacing import OnWire, Pacer

log = logging.getLogger(__name__)

OVERRUN = 1.5
"""A reply this many times longer than ``max_tokens`` (in estimated tokens, 4 characters each;
a server's tokenizer may count a few more) ran past the cap: the server ignores it."""


@dataclass(frozen=True, slots=True)
class Reply:
    """What the gateway reads from a chat completion."""

    content: str
    prompt_tokens: int | None  # the server's counts; None when it gave none
    completion_tokens: int | None
    problem: str | None = None  # why the body is no chat completion (content is then "")
    cached_tokens: int = 0  # prompt tokens the server's prefix cache held (when it says)


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def count(source: object, name: str) -> int | None:
    """A token count named ``name`` of a usage object (None: it has none, or not a count)."""
    return _count(getattr(source, name, None))


def parsed(raw: Any) -> Reply:
    """:func:`read_reply` of a raw response (``with_raw_response``) once parsed."""
    try:
        return read_reply(raw.parse())
    except ValueError:  # the body is not JSON (or not UTF-8)
        return Reply("", None, None, "not JSON")


def read_reply(completion: object) -> Reply:
    """The first choice's text and the usage, or the reason the reply is no chat completion.

    The client builds a :class:`ChatCompletion` from any JSON object without validating it (a
    missing field is None), hands back other JSON as it is and a body that is not JSON as text.
    """
    if not isinstance(completion, ChatCompletion):
        return Reply(
            "", None, None, "not JSON" if isinstance(completion, str) else "not a JSON object"
        )
    usage = completion.usage
    prompt = _count(usage.prompt_tokens) if usage else None
    done = _count(usage.completion_tokens) if usage else None
    if not completion.choices:
        return Reply("", prompt, done, "no choices")
    message = completion.choices[0].message
    if message is None:
        return Reply("", prompt, done, "no message")
    content: object = message.content
    if content is None:
        return Reply("", prompt, done)
    if not isinstance(content, str):
        return Reply("", prompt, done, "the message's content is not text")
    details = usage.prompt_tokens_details if usage else None
    cached = _count(details.cached_tokens) if details else None
    return Reply(content, prompt, done, cached_tokens=cached or 0)


def problem_of(error: ValueError) -> str:
    errors = getattr(error, "errors", None)
    if callable(errors):
        found = [
            f"{'.'.join(str(p) for p in e['loc']) or 'reply'}: {e['msg']}"
            for e in errors(include_url=False, include_input=False)[:5]
        ]
        return "; ".join(found)
    return str(error)[:300]


def worst_reply_tokens(max_tokens: int) -> int:
    """The most a streamed reply is read to, in tokens: past it, the server ignores the cap
    and the stream is closed (the server stops writing)."""
    return math.ceil(OVERRUN * max_tokens)


CUT_ROUNDS = 3
"""The times one call may be cut short (by the pacer or the server); then it is sent whole and
left to end, so that no thought of the town is lost to people's calls, only put off."""


class Whole(Exception):
    """The server answered a streamed request with a whole body (it ignores ``stream``)."""

    def __init__(self, reply: Reply, retries: int) -> None:
        super().__init__("the server does not stream")
        self.reply, self.retries = reply, retries


class Interrupted(Exception):
    """The call ended before its reply did: cut for a person's call, or by the server."""

    def __init__(self, received: str, *, by_server: bool) -> None:
        super().__init__("ended by the server" if by_server else "cut for a person's call")
        self.received = received  # the reply's text so far
        self.by_server = by_server


async def read(client: openai.AsyncOpenAI, cap_chars: int, **request: Any) -> tuple[Reply, int]:
    """Ask for a streamed completion and read it: the reply (its text stops at ``cap_chars``)
    and the client's retries. Raises :class:`Interrupted` for a stream that ended with no
    finish reason, ``openai.APIConnectionError`` for a connection lost or timed out mid-stream
    (the client's own errors before the stream began are raised as they are)."""
    raw = await client.chat.completions.with_raw_response.create(
        **request, stream=True, stream_options={"include_usage": True}
    )
    if not raw.headers.get("content-type", "").startswith("text/event-stream"):
        raise Whole(await _whole(raw.http_response), raw.retries_taken)
    parts: list[str] = []
    received = 0
    finished = chose = False
    usage = None
    try:
        async with raw.parse() as stream:
            async for chunk in stream:
                if not isinstance(chunk, ChatCompletionChunk):
                    return Reply("", None, None, "not a JSON object"), raw.retries_taken
                usage = chunk.usage or usage
                if not chunk.choices:
                    continue
                chose = True
                choice = chunk.choices[0]
                text = choice.delta.content if choice.delta else None
                if isinstance(text, str) and text:
                    parts.append(text)
                    received += len(text)
                finished = finished or choice.finish_reason is not None
                if received > cap_chars:  # a server past the cap: read no further
                    finished = True
                    break
    except ValueError:  # an event that is not JSON
        return Reply("", None, None, "not JSON"), raw.retries_taken
    except httpx2.TimeoutException as error:
        raise openai.APITimeoutError(request=error.request) from None
    except httpx2.HTTPError as error:
        raise openai.APIConnectionError(request=error.request) from None
    except openai.APIError as error:  # an event holding an error (the client raises it)
        return Reply("", None, None, f"an error: {error.message[:80]}"), raw.retries_taken
    content = "".join(parts)
    if not chose:
        return Reply("", count(usage, "prompt_tokens"), None, "no choices"), raw.retries_taken
    if not finished:
        raise Interrupted(content, by_server=True)
    prompt, done = count(usage, "prompt_tokens"), count(usage, "completion_tokens")
    details = getattr(usage, "prompt_tokens_details", None)
    cached = count(details, "cached_tokens") or 0
    return Reply(content, prompt, done, cached_tokens=cached), raw.retries_taken


async def _whole(response: httpx2.Response) -> Reply:
    """A whole body's reply (a chat completion's JSON), read as the stock path reads one: the
    client builds its completion from any JSON object without validating it."""
    try:
        body = json.loads(await response.aread())
    except httpx2.HTTPError:
        return Reply("", None, None, "not a chat completion")
    except ValueError:  # (not JSON, or not UTF-8)
        return Reply("", None, None, "not JSON")
    if not isinstance(body, dict):
        return Reply("", None, None, "not a JSON object")
    return read_reply(ChatCompletion.construct(**body))


async def send(
    client: openai.AsyncOpenAI, request: dict[str, Any], call: OnWire, pacer: Pacer, streams: bool
) -> tuple[Reply, int]:
    """One call on the wire, holding its slot: with ``streams``, streamed, read no further
    than its cap (:func:`worst_reply_tokens`) and, a cuttable (town's) call,
    until the pacer cuts it; else read whole (the client's stock path). The reply and the
    client's retries. A server that answers a stream with a whole body is told to the
    ``pacer`` (``streams``)."""
    if streams:
        cap_chars = 4 * worst_reply_tokens(request["max_tokens"])
        try:
            return await until_cut(read(client, cap_chars, **request), call.cut)
        except Whole as whole:
            if pacer.streams:
                log.warning(
                    "the LLM server answers a streamed request with a whole body (it ignores "
                    "stream): the town's calls are read whole from now on"
                )
            pacer.streams = False
            return whole.reply, whole.retries
    raw = await client.chat.completions.with_raw_response.create(**request)
    return parsed(raw), raw.retries_taken


async def until_cut(
    reading: Coroutine[Any, Any, tuple[Reply, int]], cut: asyncio.Event
) -> tuple[Reply, int]:
    """``reading``'s result, unless ``cut`` is set first: then the reading is cancelled (its
    connection closed) and :class:`Interrupted` raised."""
    read_task = asyncio.ensure_future(reading)
    cut_task = asyncio.ensure_future(cut.wait())
    try:
        await asyncio.wait({read_task, cut_task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        cut_task.cancel()
        if not read_task.done():
            read_task.cancel()  # (the stream's connection is closed as the reading ends)
            await asyncio.wait({read_task})
    if read_task.cancelled():
        raise Interrupted("", by_server=False)
    return read_task.result()

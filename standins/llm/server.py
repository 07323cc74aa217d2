"""A fake OpenAI-compatible server, answering every task with the offline brain over the wire.

A server with ``slots`` answers at most that many completions at once, each taking the latency
once it has a slot, the rest waiting first come, first served, as llama.cpp's server does (its
``-np``); with 0 slots every call is answered at once after the latency (a hosted API). With
``overrun_tokens`` every reply runs past ``max_tokens`` to that many tokens, as a server that
ignores the cap does (the ``overrun`` fault does it to one reply). A request with ``stream``
is answered as server-sent events, the chunks spread over the latency (with the usage last when
``stream_options.include_usage`` asks); a client that closes the connection mid-stream frees its
slot at once, as llama.cpp's server stops writing.

Endpoints: ``POST /v1/chat/completions``, ``POST /v1/embeddings``, ``GET /v1/models``; and for
tests ``POST /_fake/faults`` (``{"queue": ["429", "hang", ...]}``), ``GET /_fake/stats`` and
``POST /_fake/reset``. The task is the ``json_schema`` name of the response format, or the
``TASK: <name>`` line of the system message in ``json_object`` mode; the inputs are read from the
``INPUT JSON:`` block of the last user message that has one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from standins.llm import admin, wire
from standins.llm.moderation import moderations
from standins.llm.state import (
    MODEL,
    STATE,
    FakeState,
    _body,
    _error,
    _json,
)
from town.llm.tasks import Task
from town.world.gametime import sleep_until

log = logging.getLogger(__name__)


async def _hang(state: FakeState) -> web.Response:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(state.stop.wait(), state.hang_s)
    return _error(504, "the fake server hung on purpose", "server_error")


def _fault_response(fault: str, request: web.Request, body: dict[str, Any]) -> web.Response | None:
    if fault == "429":
        return _error(
            429,
            "Rate limit reached (fake).",
            "requests",
            "rate_limit_exceeded",
            headers={"retry-after": "1"},
        )
    if fault == "500":
        return _error(500, "The fake server had an error.", "server_error")
    if fault == "401":
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        return _error(
            401, f"Incorrect API key provided: {key}.", "invalid_request_error", "invalid_api_key"
        )
    if fault == "404":
        model = body.get("model")
        return _error(
            404, f"The model `{model}` does not exist.", "invalid_request_error", "model_not_found"
        )
    response_format = body.get("response_format")
    schema_asked = isinstance(response_format, dict) and (
        response_format.get("type") == "json_schema"
    )
    if fault == "reject_json_schema_500" and schema_asked:  # as llama-cpp-python's server does
        return _error(
            500,
            "1 validation error: {'type': 'literal_error', 'loc': ('body', 'response_format', "
            "'type'), 'msg': \"Input should be 'text' or 'json_object'\"}",
            "server_error",
        )
    if fault == "reject_json_schema" and schema_asked:
        return _error(
            400,
            "Invalid parameter: 'response_format' of type 'json_schema' is not "
            "supported with this model.",
            "invalid_request_error",
            None,
            "response_format",
        )
    return None


async def chat_completions(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    state.in_flight += 1
    state.max_in_flight = max(state.max_in_flight, state.in_flight)
    try:
        return await _complete(state, request)
    finally:
        state.in_flight -= 1


async def _complete(state: FakeState, request: web.Request) -> web.StreamResponse:
    """With no slots, the reply is worked out first and sent when the latency has passed since
    the request came in, so many requests at once each take the latency, as on a server that
    batches; with slots, a request waits for a free one and then takes the latency."""
    if state.serving is None:
        return await _served(state, request, time.monotonic())
    async with state.serving:
        return await _served(state, request, time.monotonic())


async def _served(state: FakeState, request: web.Request, began: float) -> web.StreamResponse:
    state.serving_now += 1
    state.max_serving = max(state.max_serving, state.serving_now)
    try:
        return await _serve(state, request, began)
    finally:
        state.serving_now -= 1


async def _serve(state: FakeState, request: web.Request, began: float) -> web.StreamResponse:
    body = await _body(request)
    if body is None:
        return _error(400, "The body must be a JSON object.", "invalid_request_error")
    state.requests += 1
    number = state.requests
    state.last.append(body)
    task = wire.task_of(body)
    spoken = wire.speech_inputs(body) if task is None else None
    state.by_task[task.name if task else spoken[0].name if spoken else "unknown"] += 1
    content, refused = _answer(state, task, body)
    if state.says and refused is None:
        content = wire.saying(state.says, content)
    streamed = body.get("stream") is True and not state.ignores_stream
    if state.latency_s > 0 and not streamed:  # (a stream's chunks are spread over it)
        await sleep_until(began + state.latency_s)
    fault = state.next_fault()
    if fault == "hang":
        state.by_fault[fault] += 1
        return await _hang(state)
    if fault is not None and (failed := _fault_response(fault, request, body)) is not None:
        state.by_fault[fault] += 1
        return failed
    if refused is not None:
        return refused
    if fault == "malformed":
        content = "Sure! Here is the JSON you asked for: " + content[: len(content) // 2]
    elif fault == "wrong_shape":
        content = json.dumps({"unexpected": "not the shape you asked for", "ok": True})
    elif fault in wire.CONTENT_FAULTS:
        content = wire.distort(fault, content)
    if fault in ("malformed", "wrong_shape", "empty_choices", *wire.CONTENT_FAULTS):
        state.by_fault[fault] += 1
    overrun = state.overrun_tokens
    if fault == "overrun":
        state.by_fault[fault] += 1
        overrun = max(overrun, wire.OVERRUN_TOKENS)
    if overrun > 0:  # past the cap: trailing blanks keep the JSON readable
        content += " " * (4 * overrun - len(content))
    prompt = wire.prompt_text(body)
    cached = wire.cached_tokens(prompt, list(state.prompts))
    state.prompts.append(prompt)
    reply = wire.completion_body(state.model, number, content, wire.prompt_tokens(body), cached)
    state.tokens += reply["usage"]["prompt_tokens"]  # (the completion's: as it is sent)
    if fault == "empty_choices":
        reply["choices"] = []
    if fault == "interrupted" and streamed:  # (a reply sent whole cannot be)
        state.by_fault[fault] += 1
    if streamed:
        options = body.get("stream_options")
        usage = isinstance(options, dict) and options.get("include_usage") is True
        chunks = wire.stream_chunks(reply, usage=usage, interrupted=fault == "interrupted")
        return await _stream(state, request, chunks, began)
    state.tokens += reply["usage"]["completion_tokens"]
    return _json(reply)


async def _stream(
    state: FakeState, request: web.Request, chunks: list[dict[str, Any]], began: float
) -> web.StreamResponse:
    """The reply as server-sent events, its chunks spread over the latency, then ``[DONE]``.
    A client that leaves mid-stream frees its slot at once (the handler is cancelled), as
    llama.cpp's server stops a stream whose connection is closed."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    try:
        for n, chunk in enumerate(chunks, 1):
            if state.latency_s > 0:
                await sleep_until(began + state.latency_s * n / len(chunks))
            await response.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())
            state.tokens += wire.estimate_tokens(wire.chunk_text(chunk))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    except (asyncio.CancelledError, ConnectionError):
        state.cut += 1  # the client left before the end
        raise
    return response


def _answer(
    state: FakeState, task: Task[Any, Any] | None, body: dict[str, Any]
) -> tuple[str, web.Response | None]:
    """The offline brain's answer as JSON text (as plain text for speech), or the error
    response a bad request gets."""
    if task is None and (spoken := wire.speech_inputs(body)) is not None:
        answer = state.brain.answer(*spoken)
        return str(getattr(answer, "text", None) or getattr(answer, "answer", "")), None
    if task is None and (schema := wire.schema_of(body)) is not None:
        return json.dumps(wire.least(schema)), None  # a task it does not know: by its schema
    if task is None:
        return "", _error(
            400,
            "Unknown task: name the json_schema after a task, put a 'TASK: <name>' line in "
            "the system message, or send its schema as the response format.",
            "invalid_request_error",
        )
    try:
        inputs = wire.inputs_of(task, body)
    except (ValueError, ValidationError) as error:
        return "", _error(
            400, f"Bad INPUT JSON for {task.name}: {str(error)[:300]}", "invalid_request_error"
        )
    return state.brain.answer(task, inputs).model_dump_json(), None


async def embeddings(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    body = await _body(request)
    if body is None:
        return _error(400, "The body must be a JSON object.", "invalid_request_error")
    try:
        texts = wire.embedding_texts(body)
    except ValueError as error:
        return _error(400, str(error), "invalid_request_error", param="input")
    dimensions = body.get("dimensions")
    dim = dimensions if isinstance(dimensions, int) and dimensions > 0 else state.embedder_dim
    state.embeddings += 1
    encoding = "base64" if body.get("encoding_format") == "base64" else "float"
    model = str(body.get("model") or state.model)
    return _json(wire.embeddings_body(model, texts, dim, encoding))


async def models(request: web.Request) -> web.StreamResponse:
    model = request.app[STATE].model
    return _json(
        {
            "object": "list",
            "data": [{"id": model, "object": "model", "created": 0, "owned_by": "bottown"}],
        }
    )


async def props(request: web.Request) -> web.StreamResponse:
    """What llama.cpp's server says of itself at ``GET /props``; the fake says its slots the
    same way. With no slots (a hosted API) there is no such route: 404, as OpenAI answers."""
    state = request.app[STATE]
    if state.slots <= 0:
        return _error(404, "Not found", "invalid_request_error")
    return _json({"total_slots": state.slots, "model_alias": state.model, "build_info": "fake"})


async def _wake_hung(app: web.Application) -> None:
    app[STATE].stop.set()


def make_app(
    *,
    latency_ms: float = 0,
    fault_rate: float = 0,
    seed: int = 0,
    embedder_dim: int = 384,
    hang_s: float = 30.0,
    model: str = MODEL,
    slots: int = 0,
    overrun_tokens: int = 0,
    ignores_stream: bool = False,
    says: str = "",
) -> web.Application:
    """The fake server's application (``hang_s``: how long a "hang" fault lasts at most;
    ``slots``: completions answered at once, 0 for no limit; ``overrun_tokens``: the length of
    every reply, past any ``max_tokens``, 0 to keep replies as they are; ``ignores_stream``: a
    streamed request is answered with the whole body, as some proxies and small servers do;
    ``says``: put before every text of every reply, as a model that writes "@everyone" would)."""
    if not 0 <= fault_rate <= 1:
        raise ValueError("fault_rate must be between 0 and 1")
    if slots < 0 or overrun_tokens < 0:
        raise ValueError("slots and overrun_tokens must be 0 or more")
    app = web.Application()
    app[STATE] = FakeState(
        latency_ms / 1000.0,
        fault_rate,
        random.Random(seed),
        embedder_dim,
        hang_s,
        model,
        slots,
        overrun_tokens,
        ignores_stream,
        says,
    )
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/props", props)
    app.router.add_post("/v1/moderations", moderations)
    admin.add_routes(app.router)
    app.on_shutdown.append(_wake_hung)
    return app


@contextlib.asynccontextmanager
async def running(host: str = "127.0.0.1", port: int = 0, **kw: Any) -> AsyncIterator[str]:
    """Serve a fake app while inside the block; yields its base URL (``http://host:port/v1``)."""
    runner = web.AppRunner(
        make_app(**kw), handler_cancellation=True, shutdown_timeout=1.0, access_log=None
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound_host, bound_port = runner.addresses[0][:2]
        yield f"http://{bound_host}:{bound_port}/v1"
    finally:
        await runner.cleanup()


async def serve(host: str, port: int, **kw: Any) -> None:
    """Serve until cancelled (the ``bottown fake-llm`` command)."""
    async with running(host, port, **kw) as base_url:
        log.info("fake LLM server listening on %s", base_url)
        await asyncio.Event().wait()

"""The LLM gateway over the real openai client, against the fake server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp import web

from standins.llm import wire as fake_wire
from standins.llm.server import running
from tests.helpers import Composed, sample
from town.llm import urgency
from town.llm.client import open_client
from town.llm.gateway import LLMGateway
from town.llm.pacing import Pacer
from town.llm.port import Brain, OfflineBrain
from town.llm.speech import SpeechTask
from town.llm.structured import max_tokens_for
from town.llm.tasks import EMOJI, REFLECT_INSIGHTS, TASKS
from town.llm.usage import Holds, TokenBudget, Unlimited, UsageTally

BY_NAME = {task.name: task for task in TASKS}

API_KEY = "test-key"


@dataclass
class Rig:
    """A gateway wired to a server through the openai client, with an in-memory usage tally."""

    url: str
    gateway: Composed
    client: openai.AsyncOpenAI
    tally: UsageTally = field(default_factory=UsageTally)

    async def admin(self, path: str, payload: Any = None) -> Any:
        root = self.url.removesuffix("/v1")
        async with aiohttp.ClientSession() as http:
            if payload is None:
                async with http.get(root + path) as response:
                    return await response.json()
            async with http.post(root + path, json=payload) as response:
                return await response.json()

    async def faults(self, *kinds: str) -> None:
        await self.admin("/_fake/faults", {"queue": list(kinds)})

    async def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = await self.admin("/_fake/stats")
        return result


@pytest.fixture
async def rig_factory() -> AsyncIterator[Callable[..., Rig]]:
    clients: list[openai.AsyncOpenAI] = []

    def build(url: str, *, timeout: float = 5.0, max_retries: int = 1, **settings: Any) -> Rig:
        client = open_client(url, API_KEY, timeout, max_retries)
        clients.append(client)
        tally = UsageTally()
        settings["slots"] = settings["ceiling"] = settings.pop("concurrency", 8)
        gateway = Composed(client, "town-model", usage=tally, **settings)
        return Rig(url, gateway, client, tally)

    yield build
    for client in clients:
        await client.close()


@pytest.fixture
async def rig(rig_factory: Callable[..., Rig]) -> AsyncIterator[Rig]:
    async with running() as url:
        yield rig_factory(url)


async def test_every_task_goes_over_the_wire(rig: Rig) -> None:
    brain: Brain = rig.gateway
    assert brain.name == "llm:town-model" and rig.gateway.mode == "llm"
    for name, task in BY_NAME.items():
        result = await brain.run(task, sample(task), resident="Isabella Rodriguez")
        offline = OfflineBrain().answer(task, sample(task))
        if isinstance(task, SpeechTask):  # plain text: whether it ends the talk is in its words
            words = result.model_dump(exclude={"end"})
            assert words == offline.model_dump(exclude={"end"}), name
        else:
            assert result == offline, name
    seen = await rig.stats()
    assert seen["by_task"] == {name: 1 for name in BY_NAME}
    assert rig.tally.total.calls == len(TASKS) and rig.tally.total.fallbacks == 0
    first = seen["last_requests"][0]
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["name"] == "rate_importance"
    assert first["response_format"]["json_schema"]["strict"] is False


async def test_usage_is_counted_per_task_and_resident_with_server_tokens(rig: Rig) -> None:
    await rig.gateway.run(EMOJI, sample(EMOJI), resident="Isabella Rodriguez")
    await rig.gateway.run(EMOJI, sample(EMOJI), resident="Klaus Mueller")
    await rig.gateway.run(BY_NAME["summarize"], sample(BY_NAME["summarize"]))
    body = (await rig.stats())["last_requests"][0]
    prompt = math.ceil(sum(len(m["content"]) for m in body["messages"]) / 4)
    completion = math.ceil(len('{"emoji":"☕🍽️🧁"}') / 4)
    emoji = rig.tally.by_task["emoji"]
    assert (emoji.calls, emoji.prompt_tokens, emoji.completion_tokens) == (
        2,
        2 * prompt,
        2 * completion,
    )
    isabella = rig.tally.by_resident["Isabella Rodriguez"]
    assert (isabella.calls, isabella.prompt_tokens, isabella.completion_tokens) == (
        1,
        prompt,
        completion,
    )
    assert set(rig.tally.by_resident) == {"Isabella Rodriguez", "Klaus Mueller"}
    assert rig.tally.total.calls == 3 and rig.tally.by_task["summarize"].answers == 1


@pytest.mark.parametrize("fault", ["429", "500"])
async def test_the_client_retries_a_rate_limit_or_server_error(rig: Rig, fault: str) -> None:
    await rig.faults(fault)  # the 429 asks for a second's wait (retry-after), which is kept
    assert (await rig.gateway.run(EMOJI, sample(EMOJI))).emoji == "☕🍽️🧁"
    assert (await rig.stats())["requests"] == 2
    assert rig.tally.by_task["emoji"].calls == 2 and rig.tally.total.fallbacks == 0


async def test_a_hang_times_out_and_is_retried(rig_factory: Callable[..., Rig]) -> None:
    async with running(hang_s=30) as url:
        rig = rig_factory(url, timeout=0.5)
        await rig.faults("hang")
        assert (await rig.gateway.run(EMOJI, sample(EMOJI))).emoji == "☕🍽️🧁"
        assert rig.tally.total.calls == 2 and rig.tally.total.fallbacks == 0
        assert (await rig.stats())["by_fault"] == {"hang": 1}


@pytest.mark.parametrize("fault", ["malformed", "wrong_shape"])
async def test_an_invalid_reply_is_repaired(rig: Rig, fault: str) -> None:
    await rig.faults(fault)
    result = await rig.gateway.run(EMOJI, sample(EMOJI), resident="Sam")
    assert result.emoji == "☕🍽️🧁"
    seen = await rig.stats()
    assert seen["requests"] == 2
    repair = seen["last_requests"][1]["messages"]
    assert [m["role"] for m in repair] == ["system", "user", "assistant", "user"]
    assert "could not be used" in repair[3]["content"]
    assert rig.tally.by_resident["Sam"].calls == 2 and rig.tally.total.fallbacks == 0


async def test_invalid_twice_falls_back_to_the_offline_brain(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    await rig.faults("malformed", "wrong_shape")
    with caplog.at_level(logging.WARNING, logger="town.llm"):
        result = await rig.gateway.run(EMOJI, sample(EMOJI), resident="Sam")
    assert result == OfflineBrain().answer(EMOJI, sample(EMOJI))
    usage = rig.tally.by_resident["Sam"]
    assert (usage.calls, usage.fallbacks) == (2, 1)
    assert usage.prompt_tokens > 0
    assert "offline brain answers" in caplog.text


async def test_a_rejected_json_schema_switches_to_json_object_for_good(rig: Rig) -> None:
    await rig.faults("reject_json_schema")
    assert (await rig.gateway.run(EMOJI, sample(EMOJI))).emoji == "☕🍽️🧁"
    assert rig.gateway.response_format_kind == "json_object"
    plan = BY_NAME["plan_day"]
    assert await rig.gateway.run(plan, sample(plan)) == OfflineBrain().answer(plan, sample(plan))
    seen = await rig.stats()
    formats = [b["response_format"]["type"] for b in seen["last_requests"]]
    assert formats == ["json_schema", "json_object", "json_object"]
    system = seen["last_requests"][2]["messages"][0]["content"]
    assert system.startswith("TASK: plan_day\n") and "JSON schema" in system
    assert rig.tally.total.fallbacks == 0


async def test_retries_give_up_into_the_offline_brain(rig: Rig) -> None:
    await rig.faults("500", "500", "500")
    assert (await rig.gateway.run(EMOJI, sample(EMOJI))).emoji == "☕🍽️🧁"
    assert (await rig.stats())["requests"] == 2  # one retry (max_retries=1)
    assert rig.tally.total.calls == 2 and rig.tally.total.fallbacks == 1


async def test_connection_errors_are_retried_then_fall_back(
    rig_factory: Callable[..., Rig],
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    rig = rig_factory(f"http://127.0.0.1:{port}/v1")
    assert (await rig.gateway.run(EMOJI, sample(EMOJI))).emoji == "☕🍽️🧁"
    assert rig.tally.total.calls == 2 and rig.tally.total.fallbacks == 1


async def test_a_spent_budget_switches_to_the_offline_brain(
    rig_factory: Callable[..., Rig], caplog: pytest.LogCaptureFixture
) -> None:
    async with running() as url:
        tally_box: list[UsageTally] = []
        budget = TokenBudget(5000, lambda: tally_box[0].total_tokens)
        rig = rig_factory(url, budget=budget)
        tally_box.append(rig.tally)
        assert rig.gateway.mode == "llm"
        await rig.gateway.run(EMOJI, sample(EMOJI))
        budget.limit_tokens = rig.tally.total_tokens
        assert rig.gateway.mode == "offline (budget spent)"
        with caplog.at_level(logging.INFO, logger="town.llm"):
            for _ in range(3):
                assert (await rig.gateway.run(EMOJI, sample(EMOJI))).emoji == "☕🍽️🧁"
        assert (await rig.stats())["requests"] == 1
        spent = [r for r in caplog.records if "budget spent" in r.getMessage()]
        assert len(spent) == 1
        assert spent[0].getMessage() == (
            "LLM daily budget spent: residents now use the offline brain"
        )
        assert rig.tally.total.fallbacks == 3 and rig.tally.total.calls == 1
        budget.limit_tokens = None
        assert rig.gateway.mode == "llm"


@pytest.mark.parametrize(
    ("fault", "setting", "mode"),
    [
        ("401", "BOTTOWN_LLM_API_KEY", "offline (API key rejected)"),
        ("404", "BOTTOWN_LLM_MODEL", "offline (model not found)"),
    ],
)
async def test_a_configuration_error_is_logged_once_and_clearly(
    rig: Rig, caplog: pytest.LogCaptureFixture, fault: str, setting: str, mode: str
) -> None:
    await rig.faults(fault)
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            assert (await rig.gateway.run(EMOJI, sample(EMOJI))).emoji == "☕🍽️🧁"
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and setting in errors[0].getMessage()
    assert f"({fault})" in errors[0].getMessage()
    assert API_KEY not in caplog.text
    assert rig.gateway.mode == mode
    assert (await rig.stats())["requests"] == 1
    assert rig.tally.total.fallbacks == 3


async def test_a_refused_model_is_logged_once_and_clearly(
    rig_factory: Callable[..., Rig], caplog: pytest.LogCaptureFixture
) -> None:
    async with stand_in(failure(403, "model_not_allowed")) as server:
        rig = rig_factory(server.url)
        with caplog.at_level(logging.ERROR):
            for _ in range(2):
                assert (await rig.gateway.run(EMOJI, sample(EMOJI))).emoji == "☕🍽️🧁"
    [error] = [r.getMessage() for r in caplog.records]
    assert "(403)" in error and "BOTTOWN_LLM_MODEL" in error and API_KEY not in error
    assert rig.gateway.mode == "offline (API key rejected)" and len(server.seen) == 1


async def test_an_exhausted_quota_is_not_retried(
    rig_factory: Callable[..., Rig], caplog: pytest.LogCaptureFixture
) -> None:
    async with stand_in(failure(429, "insufficient_quota")) as server:
        rig = rig_factory(server.url, max_retries=3)
        with caplog.at_level(logging.WARNING, logger="town.llm"):
            assert (await rig.gateway.run(EMOJI, sample(EMOJI))).emoji == "☕🍽️🧁"
    assert len(server.seen) == 1 and rig.tally.total.calls == 1
    assert "no quota left (429)" in caplog.text
    assert rig.gateway.mode == "llm"  # quota may come back: the next call asks again


async def test_concurrency_is_capped(rig_factory: Callable[..., Rig]) -> None:
    async with running(latency_ms=60) as url:
        rig = rig_factory(url, concurrency=3)
        rig.gateway.pacer.told(8)  # a server with more room: the setting caps it all the same
        results = await asyncio.gather(
            *(rig.gateway.run(EMOJI, sample(EMOJI), resident=f"r{n}") for n in range(10))
        )
        assert {r.emoji for r in results} == {"☕🍽️🧁"}
        assert (await rig.stats())["max_in_flight"] == 3


@dataclass
class StandIn:
    """A chat server on 127.0.0.1 and what it was sent: (headers, JSON body) per request."""

    url: str
    seen: list[tuple[dict[str, str], Any]] = field(default_factory=list)


def completion(content: str | None, usage: dict[str, int] | None = None) -> bytes:
    """A chat completion's body, as an OpenAI-compatible server sends it."""
    body = fake_wire.completion_body("stand-in", 1, "", 0)
    body["choices"][0]["message"]["content"] = content
    if usage is None:
        del body["usage"]
    else:
        body["usage"] = usage
    return json.dumps(body).encode()


def failure(status: int, code: str) -> tuple[int, bytes]:
    """An error reply, as OpenAI's API sends it."""
    return status, json.dumps(fake_wire.error_body("no", "invalid_request_error", code)).encode()


def events(body: bytes) -> bytes:
    """A body as a server streams it: a completion's chunks (with its usage, if it has one),
    anything else as one event; then ``[DONE]``."""
    try:
        completion = json.loads(body)
    except ValueError:
        completion = None
    choices = completion.get("choices") if isinstance(completion, dict) else None
    if choices and isinstance(choices[0].get("message"), dict):
        chunks = [json.dumps(c) for c in fake_wire.stream_chunks(completion, usage=True)]
    else:
        chunks = [body.decode("utf-8", "replace")]
    return "".join(f"data: {chunk}\n\n" for chunk in [*chunks, "[DONE]"]).encode()


@asynccontextmanager
async def stand_in(
    *replies: bytes | tuple[int, bytes],
    content_type: str = "application/json",
    streams: bool = True,
) -> AsyncIterator[StandIn]:
    """A server that answers each of ``replies`` in turn (the last one again after): a body
    with 200, or a (status, body); a streamed request as events, unless it ignores ``stream``
    (``streams=False``)."""
    server = StandIn("")

    async def reply(request: web.Request) -> web.Response:
        asked = await request.json()
        server.seen.append((dict(request.headers), asked))
        found = replies[min(len(server.seen), len(replies)) - 1]
        status, body = found if isinstance(found, tuple) else (200, found)
        if status == 200 and asked.get("stream") is True and streams:
            return web.Response(body=events(body), content_type="text/event-stream")
        return web.Response(status=status, body=body, content_type=content_type)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", reply)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    server.url = f"http://{host}:{port}/v1"
    try:
        yield server
    finally:
        await runner.cleanup()


async def test_cites_outside_the_input_are_dropped_and_tokens_estimated(
    rig_factory: Callable[..., Rig],
) -> None:
    reply = json.dumps(
        {
            "insights": [
                {"text": "Klaus Mueller and Maria Lopez are close", "cites": [11, 18, 42]},
                {"text": "Klaus invents things", "cites": [7]},
            ]
        }
    )
    async with stand_in(completion(f"```json\n{reply}\n```")) as server:
        rig = rig_factory(server.url)
        result = await rig.gateway.run(REFLECT_INSIGHTS, sample(REFLECT_INSIGHTS), resident="K")
    assert [i.cites for i in result.insights] == [[11, 18], []]
    usage = rig.tally.by_resident["K"]
    assert usage.completion_tokens == math.ceil(len(f"```json\n{reply}\n```") / 4)
    prompt = sum(len(m["content"]) for m in REFLECT_INSIGHTS.render(sample(REFLECT_INSIGHTS)))
    assert usage.prompt_tokens == math.ceil(prompt / 4)


async def test_the_request_carries_the_key_model_and_only_the_settings_given(
    rig_factory: Callable[..., Rig],
) -> None:
    emoji = completion('{"emoji": "☕"}', {"prompt_tokens": 1, "completion_tokens": 1})
    async with stand_in(emoji) as server:
        await rig_factory(server.url).gateway.run(EMOJI, sample(EMOJI))
        await rig_factory(server.url, temperature=0.25, max_tokens=20).gateway.run(
            EMOJI, sample(EMOJI)
        )
    (plain_headers, plain), (_, tuned) = server.seen
    assert plain_headers["Authorization"] == f"Bearer {API_KEY}"
    assert plain_headers["Content-Type"] == "application/json"
    assert set(plain) == {
        "model",
        "messages",
        "response_format",
        "max_tokens",
        "stream",  # a town's call streams, so a person's can cut it
        "stream_options",
    }
    assert plain["stream"] is True and plain["stream_options"] == {"include_usage": True}
    assert plain["model"] == "town-model"
    assert plain["messages"] == [dict(m) for m in EMOJI.render(sample(EMOJI))]
    assert plain["response_format"]["json_schema"]["schema"] == EMOJI.schema_for(sample(EMOJI))
    assert plain["max_tokens"] == max_tokens_for(EMOJI.schema_for(sample(EMOJI))) > 20
    assert (tuned["temperature"], tuned["max_tokens"]) == (0.25, 20)
    drop = ("temperature", "max_tokens")
    assert {k: v for k, v in tuned.items() if k not in drop} == {
        k: v for k, v in plain.items() if k not in drop
    }


async def test_the_server_s_usage_is_counted_exactly(rig_factory: Callable[..., Rig]) -> None:
    text = '{"emoji": "🥐"}'
    async with stand_in(
        completion(text, {"prompt_tokens": 1234, "completion_tokens": 56, "total_tokens": 1290}),
        completion(text, {"prompt_tokens": 700}),  # a server that counts only the prompt
    ) as server:
        rig = rig_factory(server.url)
        assert (await rig.gateway.run(EMOJI, sample(EMOJI), resident="Ann")).emoji == "🥐"
        assert (await rig.gateway.run(EMOJI, sample(EMOJI), resident="Bob")).emoji == "🥐"
    ann, bob = rig.tally.by_resident["Ann"], rig.tally.by_resident["Bob"]
    assert (ann.calls, ann.prompt_tokens, ann.completion_tokens, ann.fallbacks) == (1, 1234, 56, 0)
    assert (bob.prompt_tokens, bob.completion_tokens) == (700, math.ceil(len(text) / 4))
    assert rig.tally.total_tokens == 1234 + 56 + 700 + math.ceil(len(text) / 4)


async def test_null_content_is_an_empty_reply_that_gets_repaired(
    rig_factory: Callable[..., Rig],
) -> None:
    async with stand_in(completion(None), completion('{"emoji": "🌙"}')) as server:
        rig = rig_factory(server.url)
        assert (await rig.gateway.run(EMOJI, sample(EMOJI))).emoji == "🌙"
    repair = server.seen[1][1]["messages"]
    assert repair[2] == {"role": "assistant", "content": ""}
    assert rig.tally.total.calls == 2 and rig.tally.total.fallbacks == 0


NOT_COMPLETIONS = {
    "html page": (b"<html><body>502 Bad Gateway</body></html>", "text/html", "not JSON"),
    "broken JSON": (b'{"choices": [', "application/json", "not JSON"),
    "not UTF-8": (b"\xff\xfe\x00{", "application/json", "not JSON"),
    "JSON array": (b"[]", "application/json", "not a JSON object"),
    "error object": (b'{"error": "overloaded"}', "application/json", "no choices"),
    "empty choices": (
        b'{"object": "chat.completion", "choices": []}',
        "application/json",
        "no choices",
    ),
    "choice without message": (
        b'{"choices": [{"index": 0, "finish_reason": "stop"}]}',
        "application/json",
        "no message",
    ),
    "content parts": (
        b'{"choices": [{"message": {"role": "assistant", "content": [{"type": "text"}]}}]}',
        "application/json",
        "the message's content is not text",
    ),
}


@pytest.mark.parametrize("kind", NOT_COMPLETIONS)
async def test_a_body_that_is_no_chat_completion_falls_back_with_a_warning(
    rig_factory: Callable[..., Rig], caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    body, content_type, problem = NOT_COMPLETIONS[kind]
    async with stand_in(body, content_type=content_type, streams=False) as server:
        rig = rig_factory(server.url)
        with caplog.at_level(logging.WARNING, logger="town.llm"), urgency.person_waiting():
            result = await rig.gateway.run(EMOJI, sample(EMOJI), resident="Sam")
    assert result == OfflineBrain().answer(EMOJI, sample(EMOJI))
    warnings = [r.getMessage() for r in caplog.records if "no usable" in r.getMessage()]
    assert warnings == [
        f"LLM gave no usable emoji answer (the server's reply was not a chat completion "
        f"({problem})); the offline brain answers"
    ]
    assert len(server.seen) == 1  # neither retried nor "repaired"


async def test_an_error_in_a_stream_falls_back_with_the_server_s_words(
    rig_factory: Callable[..., Rig], caplog: pytest.LogCaptureFixture
) -> None:
    async with stand_in(b'{"error": {"message": "the model crashed"}}') as server:
        rig = rig_factory(server.url)
        with caplog.at_level(logging.WARNING, logger="town.llm"):
            result = await rig.gateway.run(EMOJI, sample(EMOJI), resident="Sam")
    assert result == OfflineBrain().answer(EMOJI, sample(EMOJI))
    said = [r.getMessage() for r in caplog.records if "no usable" in r.getMessage()]
    assert len(said) == 1 and "an error: the model crashed" in said[0]
    assert server.seen[0][1]["stream"] is True and len(server.seen) == 1
    usage = rig.tally.by_resident["Sam"]
    assert (usage.calls, usage.fallbacks, usage.prompt_tokens, usage.completion_tokens) == (
        1,
        1,
        0,
        0,
    )


@pytest.mark.parametrize("kind", NOT_COMPLETIONS)
async def test_a_stream_of_events_that_are_no_chunks_falls_back_with_a_warning(
    rig_factory: Callable[..., Rig], caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    body = NOT_COMPLETIONS[kind][0]
    async with stand_in(body) as server:  # a town's call: each body sent as events
        rig = rig_factory(server.url)
        with caplog.at_level(logging.WARNING, logger="town.llm"):
            result = await rig.gateway.run(EMOJI, sample(EMOJI), resident="Sam")
    assert result == OfflineBrain().answer(EMOJI, sample(EMOJI))
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "LLM gave no usable emoji answer" in warning or "LLM emoji call failed" in warning
    assert 1 <= len(server.seen) <= 2  # at most one repair; never sent again and again
    assert all(asked["stream"] is True for _, asked in server.seen)
    assert rig.gateway.mode == "llm"  # a bad body does not switch the gateway off


async def test_usage_beside_an_unusable_body_is_still_counted(
    rig_factory: Callable[..., Rig],
) -> None:
    body = b'{"choices": [], "usage": {"prompt_tokens": 321, "completion_tokens": 0}}'
    async with stand_in(body, completion('{"emoji": "🎨"}')) as server:
        rig = rig_factory(server.url)
        assert await rig.gateway.run(EMOJI, sample(EMOJI)) == OfflineBrain().answer(
            EMOJI, sample(EMOJI)
        )
        assert (await rig.gateway.run(EMOJI, sample(EMOJI))).emoji == "🎨"
    first = rig.tally.total
    assert (first.calls, first.fallbacks) == (2, 1)
    assert first.prompt_tokens == 321 + math.ceil(
        sum(len(m["content"]) for m in EMOJI.render(sample(EMOJI))) / 4
    )


async def test_random_faults_never_reach_the_town(rig_factory: Callable[..., Rig]) -> None:
    async with running(fault_rate=0.6, seed=3) as url:
        rig = rig_factory(url, max_retries=0)  # a fault not repaired: the offline brain answers
        for name, task in BY_NAME.items():
            result = await rig.gateway.run(task, sample(task))
            offline = OfflineBrain().answer(task, sample(task))
            assert result.model_dump(exclude={"end"}) == offline.model_dump(exclude={"end"}), name
        assert sum((await rig.stats())["by_fault"].values()) > 3


async def test_the_prompt_tokens_a_server_s_cache_held_are_counted(rig: Rig) -> None:
    for _ in range(3):  # the same prompt again: its start is in the fake's cache
        await rig.gateway.run(EMOJI, sample(EMOJI))
    share = rig.gateway.report.as_json()["cached_prompt_share"]
    assert share is not None and 0.5 < share < 1  # all but the first call's prompt


async def test_with_priority_each_call_carries_its_urgency_as_vllm_s_priority_field() -> None:
    """``BOTTOWN_LLM_PRIORITY=true``: vLLM's ``priority`` (lower first, as ours) on every call,
    a visitor's reply ahead of the town's own thought; without it the field is never sent."""
    emoji = completion('{"emoji": "☕"}', {"prompt_tokens": 1, "completion_tokens": 1})
    async with stand_in(emoji) as server:
        client = open_client(server.url, API_KEY, 5.0, 0)
        for priority in (True, False):
            pacer = Pacer(1, 5.0)
            gateway = LLMGateway(
                client, model="m", pacer=pacer, holds=Holds(Unlimited()), priority=priority
            )
            await gateway.run(EMOJI, sample(EMOJI))
            with urgency.person_waiting(urgency.VISITOR):
                await gateway.run(EMOJI, sample(EMOJI))
        await client.close()
    sent = [body.get("priority") for _, body in server.seen]
    assert sent == [EMOJI.urgency, urgency.VISITOR, None, None]

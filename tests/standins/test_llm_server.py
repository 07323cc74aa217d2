"""The fake OpenAI-compatible server, spoken to over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import aiohttp
import openai
import pytest

from standins.llm import server
from standins.llm.server import make_app, running
from standins.llm.wire import embed
from tests.helpers import SAMPLES
from town.llm.port import OfflineBrain
from town.llm.task import INPUT_MARKER
from town.llm.tasks import EMOJI, PLAN_DAY, TASKS

BY_NAME = {task.name: task for task in TASKS}


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with running() as base_url:
        yield base_url


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def chat_body(name: str, *, schema: bool = True) -> dict[str, Any]:
    task = BY_NAME[name]
    messages = task.render(task.input_model.model_validate(SAMPLES[name]))
    response_format: dict[str, Any] = {"type": "json_object"}
    if schema:
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": task.json_schema()},
        }
    return {"model": "m", "messages": messages, "response_format": response_format}


async def stats(http: aiohttp.ClientSession, url: str) -> dict[str, Any]:
    async with http.get(url.removesuffix("/v1") + "/_fake/stats") as response:
        result: dict[str, Any] = await response.json()
        return result


async def queue(http: aiohttp.ClientSession, url: str, *faults: str) -> int:
    async with http.post(
        url.removesuffix("/v1") + "/_fake/faults", json={"queue": list(faults)}
    ) as response:
        return response.status


def test_make_app_checks_its_settings() -> None:
    make_app(latency_ms=5, fault_rate=0.5, seed=3, embedder_dim=8)
    with pytest.raises(ValueError):
        make_app(fault_rate=2)
    with pytest.raises(ValueError):
        make_app(slots=-1)


@pytest.mark.parametrize("schema", [True, False])
async def test_chat_completion_in_the_real_wire_format(
    url: str, http: aiohttp.ClientSession, schema: bool
) -> None:
    body = chat_body("plan_day", schema=schema)
    async with http.post(f"{url}/chat/completions", json=body) as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json"
        reply = await response.json()
    assert reply["object"] == "chat.completion"
    message = reply["choices"][0]["message"]
    assert message["role"] == "assistant" and reply["choices"][0]["finish_reason"] == "stop"
    inputs = PLAN_DAY.input_model.model_validate(SAMPLES["plan_day"])
    assert PLAN_DAY.parse(inputs, message["content"]) == OfflineBrain().answer(PLAN_DAY, inputs)
    prompt_chars = sum(len(m["content"]) for m in body["messages"])
    assert reply["usage"] == {
        "prompt_tokens": math.ceil(prompt_chars / 4),
        "completion_tokens": math.ceil(len(message["content"]) / 4),
        "total_tokens": math.ceil(prompt_chars / 4) + math.ceil(len(message["content"]) / 4),
        "prompt_tokens_details": {"cached_tokens": 0},  # the first prompt: nothing cached yet
    }
    seen = await stats(http, url)
    assert seen["by_task"] == {"plan_day": 1}
    assert seen["last_requests"] == [body]


async def test_the_input_block_of_the_last_user_message_counts(
    url: str, http: aiohttp.ClientSession
) -> None:
    body = chat_body("emoji")
    other = EMOJI.render(EMOJI.input_model(action="sleeping"))[1]
    body["messages"] += [{"role": "assistant", "content": "{oops"}, other]
    async with http.post(f"{url}/chat/completions", json=body) as response:
        reply = await response.json()
    assert json.loads(reply["choices"][0]["message"]["content"]) == {"emoji": "😴"}


@pytest.mark.parametrize(
    "change",
    [
        lambda b: b.update(response_format={"type": "json_object"}, messages=b["messages"][1:]),
        lambda b: b["messages"][1].update(content="no data block here"),
        lambda b: b["messages"][1].update(content=f"x\n{INPUT_MARKER}" + '{"nope": 1}'),
    ],
)
async def test_requests_without_task_or_inputs_are_rejected(
    url: str, http: aiohttp.ClientSession, change: Any
) -> None:
    body = chat_body("emoji")
    change(body)
    async with http.post(f"{url}/chat/completions", json=body) as response:
        assert response.status == 400
        assert (await response.json())["error"]["type"] == "invalid_request_error"


async def test_embeddings_and_models_through_the_openai_client(url: str) -> None:
    client = openai.AsyncOpenAI(base_url=url, api_key="test-key", max_retries=0, timeout=5)
    try:
        models = await client.models.list()
        assert [m.id for m in models.data] == ["bottown-fake"]
        texts = ["the stove is burning", "the stove is on fire and burning", "a quiet walk"]
        floats = await client.embeddings.create(model="e", input=texts, encoding_format="float")
        packed = await client.embeddings.create(model="e", input=texts)
        small = await client.embeddings.create(model="e", input="hello", dimensions=16)
    finally:
        await client.close()
    vectors = [d.embedding for d in floats.data]
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert all(math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-6) for v in vectors)
    for a, b in zip(vectors, (d.embedding for d in packed.data), strict=True):
        pairs = zip(a, b, strict=True)
        assert all(math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-7) for x, y in pairs)

    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2])
    assert vectors[0] == embed("the stove is burning", 384)
    assert len(small.data[0].embedding) == 16
    assert floats.usage.prompt_tokens > 0


async def test_faults_are_queued_counted_and_reset(url: str, http: aiohttp.ClientSession) -> None:
    assert await queue(http, url, "nonsense") == 400
    assert (
        await queue(
            http, url, "429", "500", "malformed", "wrong_shape", "401", "404", "reject_json_schema"
        )
        == 200
    )
    statuses, contents = [], []
    for _ in range(8):
        async with http.post(f"{url}/chat/completions", json=chat_body("emoji")) as response:
            statuses.append(response.status)
            if response.status == 429:
                assert response.headers["retry-after"] == "1"
            reply = await response.json()
            if response.status == 200:
                contents.append(reply["choices"][0]["message"]["content"])
    assert statuses == [429, 500, 200, 200, 401, 404, 400, 200]
    with pytest.raises(json.JSONDecodeError):
        json.loads(contents[0])
    assert json.loads(contents[1]).keys() == {"unexpected", "ok"}
    assert json.loads(contents[2]) == {"emoji": "☕🍽️🧁"}
    seen = await stats(http, url)
    assert seen["by_fault"] == {
        f: 1 for f in ("429", "500", "malformed", "wrong_shape", "401", "404", "reject_json_schema")
    }
    assert seen["requests"] == 8 and seen["queued"] == []
    async with http.post(url.removesuffix("/v1") + "/_fake/reset") as response:
        assert response.status == 200
    assert (await stats(http, url))["requests"] == 0


async def test_reject_json_schema_spares_json_object_requests(
    url: str, http: aiohttp.ClientSession
) -> None:
    await queue(http, url, "reject_json_schema")
    async with http.post(f"{url}/chat/completions", json=chat_body("emoji", schema=False)) as r:
        assert r.status == 200


async def test_a_hang_ends_in_a_504_when_the_server_stops(http: aiohttp.ClientSession) -> None:
    async def hung_status(base: str) -> int:
        async with http.post(f"{base}/chat/completions", json=chat_body("emoji")) as response:
            return response.status

    async with running(hang_s=3600) as base:
        await queue(http, base, "hang")
        reply = asyncio.create_task(hung_status(base))
        deadline = time.monotonic() + 30
        while (seen := await stats(http, base))["by_fault"] != {"hang": 1}:
            if time.monotonic() >= deadline:  # a generous guard: the state never came
                pytest.fail(f"the request never hung: {seen}")
            await asyncio.sleep(0.01)
    async with asyncio.timeout(60):
        assert await reply == 504


async def test_latency_is_counted_from_the_request_s_arrival(
    http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    deadlines: list[float] = []

    async def record(deadline: float) -> None:
        deadlines.append(deadline)

    monkeypatch.setattr(server, "sleep_until", record)
    monkeypatch.setattr(server, "time", SimpleNamespace(monotonic=lambda: 100.0))
    for latency_ms, waits in ((20, 3), (0, 0)):
        async with running(latency_ms=latency_ms) as base:
            for _ in range(3):
                async with http.post(f"{base}/chat/completions", json=chat_body("emoji")) as r:
                    assert r.status == 200
        assert deadlines == pytest.approx([100.02] * waits)
        deadlines.clear()


async def test_seeded_random_faults_repeat(http: aiohttp.ClientSession) -> None:
    runs: list[list[int]] = []
    for _ in range(2):
        async with running(fault_rate=0.5, seed=7) as base:
            statuses = []
            for _ in range(10):
                async with http.post(f"{base}/chat/completions", json=chat_body("emoji")) as r:
                    statuses.append(r.status)
            runs.append(statuses)
    assert runs[0] == runs[1]
    assert set(runs[0]) > {200}


async def test_slots_answer_so_many_at_once_the_rest_first_come_first_served(
    http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = asyncio.Event()
    served: list[str] = []

    async def held(deadline: float) -> None:
        await opened.wait()

    monkeypatch.setattr(server, "sleep_until", held)
    async with running(latency_ms=1000, slots=1) as base:

        async def ask(name: str) -> int:
            body = chat_body("emoji")
            async with http.post(f"{base}/chat/completions", json=body) as r:
                served.append(name)
                return r.status

        calls = []
        for name in ("first", "second", "third"):
            calls.append(asyncio.create_task(ask(name)))
            for _ in range(3000):  # a generous guard: each request arrives in time
                if (await stats(http, base))["in_flight"] == len(calls):
                    break
                await asyncio.sleep(0.01)
        seen = await stats(http, base)
        assert seen["slots"] == 1 and seen["max_serving"] == 1 and seen["requests"] == 1
        opened.set()
        assert await asyncio.gather(*calls) == [200, 200, 200]
    assert served == ["first", "second", "third"]


async def test_an_overrun_reply_runs_past_max_tokens(url: str, http: aiohttp.ClientSession) -> None:
    await queue(http, url, "overrun")
    body = {**chat_body("emoji"), "max_tokens": 50}
    for expected in (server.wire.OVERRUN_TOKENS, None):
        async with http.post(f"{url}/chat/completions", json=body) as r:
            reply = await r.json()
        tokens = reply["usage"]["completion_tokens"]
        if expected is None:
            assert tokens < 50  # the next one keeps to the cap
        else:
            assert tokens == expected
            content = reply["choices"][0]["message"]["content"]
            assert json.loads(content)["emoji"]  # still the answer, with blanks after it
    async with (
        running(overrun_tokens=3000) as base,
        http.post(f"{base}/chat/completions", json=body) as r,
    ):
        assert (await r.json())["usage"]["completion_tokens"] == 3000


@pytest.mark.parametrize("name", ["utter", "interview"])
async def test_speech_asked_as_plain_text_is_answered_as_plain_text(
    url: str, http: aiohttp.ClientSession, name: str
) -> None:
    task = BY_NAME[name]
    inputs = task.input_model.model_validate(SAMPLES[name])
    body = {"model": "m", "messages": task.render(inputs), "stop": ["\n"], "max_tokens": 96}
    async with http.post(f"{url}/chat/completions", json=body) as response:
        reply = await response.json()
    said = reply["choices"][0]["message"]["content"]
    offline = OfflineBrain().answer(task, inputs).model_dump(exclude={"end"})
    assert said == next(iter(offline.values()))
    assert (await stats(http, url))["by_task"] == {name: 1}


async def test_a_prompt_s_start_seen_lately_is_reported_cached(
    url: str, http: aiohttp.ClientSession
) -> None:
    cached = []
    for action in ("baking bread", "sleeping"):
        body = chat_body("emoji")
        body["messages"][1]["content"] = body["messages"][1]["content"].replace("{", action, 1)
        async with http.post(f"{url}/chat/completions", json=body) as r:
            cached.append((await r.json())["usage"]["prompt_tokens_details"]["cached_tokens"])
    system = len(chat_body("emoji")["messages"][0]["content"])
    assert cached[0] == 0 and cached[1] >= system // 4  # the system message at least

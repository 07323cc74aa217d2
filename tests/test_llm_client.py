"""The openai client bottown opens sends what the stock ``openai.AsyncOpenAI`` sends."""

from __future__ import annotations

from typing import Any

import httpx2
import openai
import pytest

from town.llm.client import TownHttpClient, TownOpenAI, open_client

REPLY = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": '{"ok": true}'},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}
MODELS = {"object": "list", "data": [{"id": "m", "object": "model", "created": 1, "owned_by": "x"}]}


def recorder(sent: list[httpx2.Request]) -> httpx2.MockTransport:
    def answer(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        body = MODELS if request.method == "GET" else REPLY
        return httpx2.Response(200, json=body)

    return httpx2.MockTransport(answer)


def seen(request: httpx2.Request) -> tuple[Any, ...]:
    """What went out, but the idempotency key (new for every request)."""
    headers = [(k, v) for k, v in request.headers.multi_items() if k != "idempotency-key"]
    return request.method, str(request.url), headers, request.content, request.extensions


async def both(call: Any, **client: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The request ``call`` makes through the stock client and through bottown's."""
    stock: list[httpx2.Request] = []
    ours: list[httpx2.Request] = []
    settings = {"api_key": "k", "timeout": 30.0, "max_retries": 0, **client}
    async with (
        openai.AsyncOpenAI(
            **settings, http_client=openai.DefaultAsyncHttpxClient(transport=recorder(stock))
        ) as a,
        TownOpenAI(**settings, http_client=TownHttpClient(transport=recorder(ours))) as b,
    ):
        await call(a)
        await call(b)
    return seen(stock[0]), seen(ours[0])


async def chat(client: openai.AsyncOpenAI) -> None:
    await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "héllo"}], temperature=0.2
    )


async def raw_post(client: openai.AsyncOpenAI) -> None:  # as the gateway posts
    body = {"model": "m", "messages": [{"role": "system", "content": "s"}]}
    await client.post(
        "/chat/completions", body=body, cast_to=bytes, options={"security": {"bearer_auth": True}}
    )


async def listing_with_query(client: openai.AsyncOpenAI) -> None:  # (built by httpx itself)
    await client.models.list(extra_query={"page": "2"}, extra_headers={"X-Extra": "1"})


@pytest.mark.parametrize("call", [chat, raw_post, listing_with_query])
async def test_the_same_request_goes_out_as_from_the_stock_client(call: Any) -> None:
    stock, ours = await both(call, base_url="http://127.0.0.1:9/v1")
    assert ours == stock


async def test_a_base_url_with_a_query_and_headers_of_the_callers_own() -> None:
    async def custom(client: openai.AsyncOpenAI) -> None:
        await client.post(
            "/chat/completions",
            body={"model": "m"},
            cast_to=bytes,
            options={"headers": {"Accept-Encoding": "identity", "x-mine": "1"}},
        )

    stock, ours = await both(
        custom, base_url="http://127.0.0.1:9/v1?api-version=1", default_headers={"X-Team": "t"}
    )
    assert ours == stock
    assert ("accept-encoding", "identity") in ours[2]


async def test_a_changed_base_url_is_followed() -> None:
    sent: list[httpx2.Request] = []
    async with TownOpenAI(
        api_key="k", base_url="http://127.0.0.1:9/v1", max_retries=0,
        http_client=TownHttpClient(transport=recorder(sent)),
    ) as client:  # fmt: skip
        await raw_post(client)
        client.base_url = "http://127.0.0.1:10/v2"
        await raw_post(client)
    assert [str(r.url) for r in sent] == [
        "http://127.0.0.1:9/v1/chat/completions",
        "http://127.0.0.1:10/v2/chat/completions",
    ]


async def test_the_client_introduces_itself_as_the_openai_client() -> None:
    async with open_client("http://127.0.0.1:9/v1", "k", 5.0) as client:
        assert isinstance(client, TownOpenAI)
        assert client.user_agent == f"AsyncOpenAI/Python {openai.__version__}"

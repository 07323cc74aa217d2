"""The plain-HTTP transport, against a raw TCP server on 127.0.0.1 that answers each request with
scripted bytes: framing, keep-alive, stale connections, bad answers, timeouts, and the choice of
transport for a base URL."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx2
import openai
import pytest

from town.llm.client import SpreadTransport, open_client, plain_http
from town.llm.plain_http import PlainHTTPTransport

Answer = Callable[[int], bytes | None]  # the n-th request -> bytes to send (None: hang up)


@dataclass
class Server:
    url: str
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    handlers: list[asyncio.Task[None]] = field(default_factory=list)


@asynccontextmanager
async def raw_server(
    answer: Answer, *, close_after: bool = False, close_on: Collection[int] = ()
) -> AsyncIterator[Server]:
    """Reads each request (head and Content-Length body) and writes ``answer(n)``; hangs up
    when it is None, after every answer with ``close_after``, or after the answers to the
    requests numbered in ``close_on``."""
    server = Server("")

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        server.connections += 1
        server.handlers.append(asyncio.current_task())  # type: ignore[arg-type]
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                server.requests.append(head + await reader.readexactly(length))
                reply = answer(len(server.requests) - 1)
                if reply is None:
                    break
                writer.write(reply)
                await writer.drain()
                if close_after or len(server.requests) - 1 in close_on:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    listener = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    server.url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        listener.close()
        for handler in server.handlers:
            handler.cancel()
        await asyncio.gather(*server.handlers)


def ok(body: bytes, *extra: bytes) -> bytes:
    head = [b"HTTP/1.1 200 OK", b"content-type: application/json", *extra]
    return b"\r\n".join([*head, b"content-length: %d" % len(body), b"", b""]) + body


def chunked(*parts: bytes) -> bytes:
    chunks = b"".join(b"%x;note=1\r\n%s\r\n" % (len(p), p) for p in parts)
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    return head + chunks + b"0\r\nx-trailer: yes\r\n\r\n"


async def fetch(transport: PlainHTTPTransport, url: str, **timeout: float) -> httpx2.Response:
    request = httpx2.Request(
        "POST",
        url + "/v1/chat/completions",
        content=b'{"q": 1}',
        headers={"authorization": "Bearer k", "accept-encoding": "gzip"},
        extensions={"timeout": {"connect": 2, "read": 2, "write": 2, "pool": 2, **timeout}},
    )
    response = await transport.handle_async_request(request)
    await response.aread()
    return response


async def test_bodies_framed_every_way_are_read_and_connections_kept_alive() -> None:
    answers = [
        ok(b'{"a": 1}'),
        chunked(b'{"b"', b": 2}"),
        b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b'{"c": 3}'),
        b"HTTP/1.1 204 No Content\r\n\r\n",
    ]
    transport = PlainHTTPTransport()
    async with raw_server(lambda n: answers[n]) as server:
        bodies = [(await fetch(transport, server.url)).content for _ in answers]
        assert bodies == [b'{"a": 1}', b'{"b": 2}', b'{"c": 3}', b""]
        assert server.connections == 1  # one connection carried them all
        request = server.requests[0]
        assert request.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
        assert request.endswith(b'\r\n\r\n{"q": 1}')
        head = request.lower()
        assert head.count(b"content-length") == 1 and b"content-length: 8\r\n" in head
        assert b"accept-encoding: identity" in head and b"gzip" not in head
        assert b"authorization: bearer k" in head and b"host: 127.0.0.1" in head
    await transport.aclose()


async def test_a_body_up_to_the_close_and_a_close_asked_for_end_the_connection() -> None:
    answers = [
        b"HTTP/1.1 200 OK\r\n\r\nuntil the end",
        ok(b"once", b"connection: close"),
        b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nhi",
    ]
    transport = PlainHTTPTransport()
    async with raw_server(lambda n: answers[n], close_after=True) as server:
        got = [(await fetch(transport, server.url)) for _ in answers]
        assert [r.content for r in got] == [b"until the end", b"once", b"hi"]
        assert got[2].extensions["http_version"] == b"HTTP/1.0"
        assert server.connections == 3
    await transport.aclose()


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    transport = PlainHTTPTransport()
    async with raw_server(lambda n: ok(b"fine"), close_after=True) as server:
        assert (await fetch(transport, server.url)).content == b"fine"
        await asyncio.sleep(0.05)  # the server's end of stream arrives meanwhile
        assert (await fetch(transport, server.url)).content == b"fine"
        assert server.connections == 2
    await transport.aclose()


async def test_a_request_a_kept_connection_lost_unanswered_goes_again_on_a_new_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The server closed a kept connection as the next request went out on it (here: it read
    the request and hung up): not a byte came back, so the request goes once more on a new
    connection. A fresh connection that ends so, or a kept one that ended mid-response, is an
    error as before: the request may have been acted on."""
    transport = PlainHTTPTransport()
    answers = {0: ok(b"first"), 1: None, 2: ok(b"second")}
    async with raw_server(answers.get) as server:
        assert (await fetch(transport, server.url)).content == b"first"
        with caplog.at_level(logging.DEBUG, logger="town.llm.plain_http"):
            assert (await fetch(transport, server.url)).content == b"second"
        assert len(server.requests) == 3 and server.requests[1] == server.requests[2]
        assert server.connections == 2
        assert any("sent again" in r.getMessage() for r in caplog.records)
    partial = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort"
    async with raw_server({0: ok(b"first"), 1: partial}.get, close_on={1}) as server:
        assert (await fetch(transport, server.url)).content == b"first"
        with pytest.raises(httpx2.RemoteProtocolError, match="mid-response"):
            await fetch(transport, server.url)
        assert len(server.requests) == 2  # not sent again
    async with raw_server(lambda n: None) as server:
        with pytest.raises(httpx2.RemoteProtocolError, match="mid-response"):
            await fetch(transport, server.url)
        assert len(server.requests) == 1
    await transport.aclose()


CHUNK = b"800\r\n" + b"x" * 0x800 + b"\r\n"


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (None, "closed the connection mid-response"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort", "mid-response"),
        (b"SMTP ready\r\n\r\n", "status line"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "header line"),
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nabc", "length"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
        (ok(b"x" * 5000), "over 4096"),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + CHUNK * 3, "over 4096"),
    ],
)
async def test_bad_answers_are_protocol_errors(reply: bytes | None, says: str) -> None:
    transport = PlainHTTPTransport(max_body=4096)
    async with raw_server(lambda n: reply, close_after=True) as server:
        with pytest.raises(httpx2.RemoteProtocolError, match=says):
            await fetch(transport, server.url)
    await transport.aclose()


async def test_a_silent_server_times_out_and_a_closed_port_cannot_be_reached() -> None:
    transport = PlainHTTPTransport()
    async with raw_server(lambda n: b"") as server:  # reads, then never answers
        with pytest.raises(httpx2.ReadTimeout):
            await fetch(transport, server.url, read=0.2)
        url = server.url
    with pytest.raises(httpx2.ConnectError, match=r"127\.0\.0\.1"):
        await fetch(transport, url)
    with pytest.raises(httpx2.UnsupportedProtocol):
        await fetch(transport, "https://127.0.0.1:1")
    await transport.aclose()


async def test_a_line_break_in_a_header_is_refused_before_sending() -> None:
    evil = {"x-evil": "a\r\nhost: elsewhere"}  # httpx lets it through
    request = httpx2.Request("POST", "http://127.0.0.1:1/v1", content=b"{}", headers=evil)
    with pytest.raises(httpx2.LocalProtocolError, match="line break"):
        await PlainHTTPTransport().handle_async_request(request)


async def test_the_openai_client_over_it_maps_failures_as_it_does_its_own() -> None:
    """Through ``open_client``: a reply is read, a silent server is APITimeoutError and a
    hang-up APIConnectionError (which the gateway retries)."""
    completion = json.dumps({"choices": [{"message": {"content": "{}"}}]}).encode()
    answers = [ok(completion), b"", None]
    async with raw_server(lambda n: answers[n]) as server:
        client = open_client(server.url + "/v1", "k", 0.3)
        assert isinstance(client._client._transport, PlainHTTPTransport)
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        post = {"body": body, "cast_to": bytes}
        assert await client.post("/chat/completions", **post) == completion
        with pytest.raises(openai.APITimeoutError):
            await client.post("/chat/completions", **post)
        with pytest.raises(openai.APIConnectionError):
            await client.post("/chat/completions", **post)
        await client.close()


def test_plain_http_serves_unproxied_http_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert plain_http("http://127.0.0.1:11434/v1") and plain_http("http://gpu-box:8000/v1")
    assert not plain_http("https://llm.example/v1") and not plain_http("http:///v1")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert not plain_http("http://gpu-box:8000/v1")
    monkeypatch.setenv("NO_PROXY", "gpu-box")
    assert plain_http("http://gpu-box:8000/v1")
    assert isinstance(
        open_client("https://api.example/v1", "k", 1)._client._transport, SpreadTransport
    )

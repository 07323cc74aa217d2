"""The fake Slack served on 127.0.0.1 (its state: ``standins.slack.workspace``).

``POST /api/<method>``: the Web API, with a form or JSON body (or query parameters), the bot
token in ``Authorization: Bearer`` (``oauth.v2.access``: the app's client id and secret, HTTP
Basic); queued faults answered first. ``GET /oauth/v2/authorize``: the install page, approved by
the signed-in member (``FakeSlack.signed_in``), redirecting to the app with a code. Response
URLs record what an app answers a command with. Socket Mode: ``apps.connections.open`` (app-level
token) hands out ``ws://127.0.0.1:<port>/link``; the websocket says hello, sends every queued
envelope and records the acks it gets back.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from aiohttp import WSMsgType, web

from standins.slack.blocks import blocks_problem
from standins.slack.workspace import Call, FakeSlack


async def _params(request: web.Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        params.update(await request.json())
    elif request.can_read_body:
        params.update({k: v for k, v in (await request.post()).items() if isinstance(v, str)})
    return params


def _app(fake: FakeSlack) -> web.Application:
    async def api(request: web.Request) -> web.Response:
        method = request.match_info["method"]
        authorization = request.headers.get("Authorization", "")
        token = authorization.removeprefix("Bearer ").strip()
        basic = authorization.removeprefix("Basic ").strip() if token.startswith("Basic") else ""
        token = "" if basic else token
        params = await _params(request)
        fake.calls.append(Call(method, params, token))
        fake.news.set()
        queued = fake.faults.get(method)
        if queued:
            fault = queued.popleft()
            if fault.stored:
                fake.answer(method, params, token, basic)
            if fault.drop:
                assert request.transport is not None
                request.transport.close()  # no answer: the client sees the connection end
                return web.Response(status=500)
            headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after else {}
            if fault.status >= 500:
                return web.Response(status=fault.status, text="upstream trouble", headers=headers)
            body = {"ok": False, "error": fault.error or "ratelimited"}
            return web.json_response(body, status=fault.status, headers=headers)
        return web.json_response(fake.answer(method, params, token, basic))

    async def authorize(request: web.Request) -> web.Response:
        status, where = fake.authorize(dict(request.query))
        if status == 302:
            raise web.HTTPFound(where)
        return web.Response(status=status, text=where)

    async def respond(request: web.Request) -> web.Response:
        body = await request.json()
        if blocks_problem(body.get("blocks")):
            return web.Response(status=400, text="invalid_blocks")
        fake.responses.append({"name": request.match_info["name"], **body})
        return web.Response(text="ok")

    async def link(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        fake.sockets += 1
        fake.live.append(ws)
        await ws.send_json({"type": "hello", "num_connections": 1, "debug_info": {"host": "x"}})
        while fake.envelopes:
            await ws.send_json(fake.envelopes.pop(0))
        fake.news.set()
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    fake.acks.append(json.loads(message.data))
                    fake.news.set()
        finally:
            fake.live.remove(ws)
        return ws

    app = web.Application()
    app.router.add_route("*", "/api/{method}", api)
    app.router.add_get("/oauth/v2/authorize", authorize)
    app.router.add_post("/respond/{name}", respond)
    app.router.add_get("/link", link)
    return app


@asynccontextmanager
async def running_fake_slack() -> AsyncIterator[FakeSlack]:
    """The fake Slack, served on a free loopback port for the duration of the block."""
    fake = FakeSlack()
    runner = web.AppRunner(_app(fake), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    fake.base = f"http://{host}:{port}"
    try:
        yield fake
    finally:
        await runner.cleanup()


@contextmanager
def fake_slack_in_thread() -> Iterator[FakeSlack]:
    """The fake Slack served by a thread of its own, for a test that drives another process
    (its calls are recorded in the returned ``FakeSlack``; read them, do not mutate them)."""
    ready: list[FakeSlack] = []
    stop = threading.Event()

    async def serve() -> None:
        async with running_fake_slack() as fake:
            ready.append(fake)
            await asyncio.to_thread(stop.wait)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not ready:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the fake Slack did not start within 30 s")
        time.sleep(0.01)
    try:
        yield ready[0]
    finally:
        stop.set()
        thread.join(5)


async def wait_for(fake: FakeSlack, condition: Callable[[], object], seconds: float = 30.0) -> None:
    """Wait until ``condition()`` holds, checking whenever the fake records something."""
    try:
        async with asyncio.timeout(seconds):
            while not condition():
                fake.news.clear()
                await fake.news.wait()
    except TimeoutError:
        raise AssertionError(
            f"the awaited call never reached the fake Slack ({seconds:g} s)"
        ) from None

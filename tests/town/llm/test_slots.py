"""Asking a server its slots: llama.cpp's ``GET /props`` at its root, and nothing from one
that has no such route."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from standins.llm.server import running
from tests.helpers import Composed, sample
from town.llm.client import open_client
from town.llm.pacing import Pacer, default_slots, props_url, told_slots
from town.llm.tasks import EMOJI


@pytest.mark.parametrize(
    "base",
    ["http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080"],
)
def test_props_are_asked_at_the_server_s_root(base: str) -> None:
    assert props_url(base) == "http://127.0.0.1:8080/props"


async def test_a_server_is_asked_once_and_its_slots_told_to_the_pacer() -> None:
    async with running(slots=2) as url:
        client = open_client(url, "key", 5.0)
        pacer = Pacer(8, 60)
        await pacer.ask_once(client)
        assert pacer.asked.is_set() and pacer.said_by == "server" and pacer.slots == 2
        pacer.slots = 5
        await pacer.ask_once(client)  # asked once only
        assert pacer.slots == 5
        await client.close()


async def test_a_server_that_lists_its_slots_is_counted() -> None:
    from aiohttp import web

    async def listed(request: web.Request) -> web.Response:
        return web.json_response([{"id": 0, "is_processing": False}, {"id": 1}, {"id": 2}])

    app = web.Application()
    app.router.add_get("/slots", listed)  # llama.cpp's /slots, with no total_slots at /props
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    client = open_client(f"http://{host}:{port}/v1", "key", 5.0)
    try:
        assert await told_slots(client) == 3
    finally:
        await client.close()
        await runner.cleanup()


@pytest.mark.parametrize(
    ("base", "slots"),
    [
        ("http://127.0.0.1:8080/v1", 1),
        ("http://localhost:11434/v1", 1),
        ("http://192.168.1.20:8000/v1", 1),
        ("http://gpu-box:8000/v1", 1),
        ("https://api.example.com/v1", 8),
        (None, 8),
    ],
)
def test_a_server_that_does_not_say_has_one_slot_at_home_and_the_ceiling_hosted(
    base: str | None, slots: int
) -> None:
    assert default_slots(base, 8) == slots


async def test_a_server_without_props_or_gone_says_nothing() -> None:
    async with running(slots=0) as url:  # a hosted API: 404
        client = open_client(url, "key", 5.0)
        assert await told_slots(client) is None
        await client.close()
    gone = open_client(url, "key", 5.0)  # nobody listens there any more
    assert await told_slots(gone) is None
    await gone.close()


async def test_calls_made_while_the_server_is_asked_wait_for_its_answer() -> None:
    async with running(slots=1, latency_ms=50) as url:
        client = open_client(url, "key", 5.0)
        brain = Composed(client, "m", slots=64)  # as set: more than the server has
        await asyncio.gather(*(brain.run(EMOJI, sample(EMOJI)) for _ in range(8)))
        await client.close()
        stats_url = url.removesuffix("/v1") + "/_fake/stats"
        async with aiohttp.ClientSession() as http, http.get(stats_url) as response:
            stats = await response.json()
    assert stats["max_in_flight"] == 1  # none went out at the setting's 64 before it said one

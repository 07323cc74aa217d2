"""Asking a server its slots: llama.cpp's ``GET /props`` at its root, and nothing from one
that has no such route."""

from __future__ import annotations

import pytest

from standins.llm.server import running
from town.llm.client import open_client
from town.llm.pacing import Pacer
from town.llm.slots import ask_once, props_url, told_slots


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
        await ask_once(pacer, client)
        assert pacer.asked and pacer.known and pacer.limit == 2
        pacer.timed_out()
        await ask_once(pacer, client)  # asked once only: the time-out's halving stands
        assert pacer.limit == 1
        await client.close()


async def test_a_server_without_props_or_gone_says_nothing() -> None:
    async with running(slots=0) as url:  # a hosted API: 404
        client = open_client(url, "key", 5.0)
        assert await told_slots(client) is None
        await client.close()
    gone = open_client(url, "key", 5.0)  # nobody listens there any more
    assert await told_slots(gone) is None
    await gone.close()

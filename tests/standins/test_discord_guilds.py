"""The fake Discord with many guilds, spoken to as the bot would: its gateway over a websocket,
its REST API over HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from standins.discord.server import FakeDiscord
from standins.discord.wire import API, MANAGE_GUILD

AUTH = {"Authorization": "Bot test-token"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    server = await FakeDiscord().start()
    yield server
    await server.stop()


async def _events(ws: aiohttp.ClientWebSocketResponse, until: str) -> list[dict[str, Any]]:
    """Gateway dispatches up to and including the first ``until``."""
    seen: list[dict[str, Any]] = []
    async for msg in ws:
        frame = json.loads(msg.data)
        if frame.get("op") == 0:
            seen.append(frame)
            if frame["t"] == until:
                return seen
    raise AssertionError(f"the gateway closed before {until}")


async def test_each_guild_is_its_own_and_removing_the_bot_closes_it(fake: FakeDiscord) -> None:
    second = fake.add_guild("Second Server")
    mod_role = second.add_role("Town Keepers")
    elsewhere = fake.add_guild("Not Invited")
    async with aiohttp.ClientSession() as http, http.ws_connect(fake.gateway_url) as ws:
        await ws.receive()  # HELLO
        await ws.send_json({"op": 2, "d": {"token": "test-token", "intents": 1}})
        ready = await _events(ws, "GUILD_CREATE")
        assert [g["id"] for g in ready[0]["d"]["guilds"]] == [str(fake.guild_id)]
        await fake.invite(second)
        joined = (await _events(ws, "GUILD_CREATE"))[-1]["d"]
        assert joined["id"] == str(second.id) and joined["name"] == "Second Server"
        assert "Town Keepers" in [r["name"] for r in joined["roles"]]

        async def call(method: str, path: str, body: Any = None) -> tuple[int, Any]:
            async with http.request(method, fake.url + API + path, json=body, headers=AUTH) as r:
                return r.status, await r.json() if r.content_length != 0 else None

        status, made = await call("POST", f"/guilds/{second.id}/channels", {"name": "Hobbs Cafe"})
        assert status == 201 and made["guild_id"] == str(second.id)
        assert (await call("GET", f"/guilds/{fake.guild_id}/channels"))[1] == []
        status, hook = await call("POST", f"/channels/{made['id']}/webhooks", {"name": "Town"})
        assert status == 200
        # a member of both servers: one user, a member in each, with each server's roles
        alice = fake.add_member("Alice")
        fake.add_member("Alice", guild=second, user=alice, roles=(mod_role["id"],))
        both = second.permissions(second.members[alice["id"]])
        assert not both & MANAGE_GUILD and mod_role["id"] in second.members[alice["id"]]["roles"]
        assert (await call("GET", f"/guilds/{elsewhere.id}/channels"))[1]["code"] == 50001

        await fake.remove_bot(second)
        gone = (await _events(ws, "GUILD_DELETE"))[-1]["d"]
        assert gone == {"id": str(second.id)}  # no "unavailable": removed, not an outage
        status, refused = await call("POST", f"/guilds/{second.id}/channels", {"name": "park"})
        assert (status, refused["code"]) == (403, 50001)
        status, refused = await call("POST", f"/channels/{made['id']}/messages", {"content": "x"})
        assert (status, refused["code"]) == (403, 50001)
        status, refused = await call("POST", f"/webhooks/{hook['id']}/{hook['token']}", {})
        assert (status, refused["code"]) == (404, 10015)  # its webhooks went with it
        status, refused = await call(
            "GET", f"/applications/{fake.app_id}/guilds/{second.id}/commands"
        )
        assert (status, refused["code"]) == (403, 50001)
        assert (await call("GET", "/guilds/1234/channels"))[1]["code"] == 10004

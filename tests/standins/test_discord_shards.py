"""The fake Discord's gateway as a sharded bot meets it: discord.py's own ``AutoShardedClient``
(and a plain ``Client``) against it, each shard its guilds' events, the close codes Discord ends
a session with, its limits on starting sessions, and a resume after a dropped connection."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import discord
import pytest

from standins.discord.guild import Guild
from standins.discord.server import FakeDiscord
from standins.discord.sessions import IDENTIFY_WINDOW_S, KNOWN_INTENTS, StartLimit
from tests.adapters.discord.support import fake_discord, until
from tests.fakes.platform import Sleeps


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    async with fake_discord(monkeypatch) as server:
        yield server


class Shards(discord.AutoShardedClient):
    """discord.py's sharded client, hearing messages; it waits between IDENTIFYs as discord.py
    does by default, on the fake's clock (``paced``), or not at all."""

    def __init__(self, fake: FakeDiscord, *, paced: bool = True, **options: Any) -> None:
        intents = discord.Intents.none()
        intents.guilds = intents.guild_messages = intents.message_content = True
        super().__init__(intents=intents, guild_ready_timeout=0.05, **options)
        self.heard: list[discord.Message] = []
        self.paced, self.sleep = paced, Sleeps(fake.clock)

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        if self.paced and not initial:
            await self.sleep(IDENTIFY_WINDOW_S)

    async def on_message(self, message: discord.Message) -> None:
        self.heard.append(message)


@contextlib.asynccontextmanager
async def connected(client: discord.Client) -> AsyncIterator[asyncio.Task[None]]:
    """The client logged in and READY (what ended its connection instead, raised)."""
    await client.login("test-token")
    task = asyncio.create_task(client.connect())
    ready = asyncio.create_task(client.wait_until_ready())
    await asyncio.wait({task, ready}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    try:
        if task.done():
            task.result()
        assert ready.done(), "no READY"
        yield task
    finally:
        ready.cancel()
        await client.close()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await task


async def refused(client: discord.Client) -> BaseException:
    """What ended the client's connection before it was ready."""
    await client.login("test-token")
    try:
        await asyncio.wait_for(client.connect(), 30)
    except BaseException as exc:
        return exc
    finally:
        await client.close()
    raise AssertionError("the gateway let it connect")


def shard_of(guild: Guild, count: int) -> int:
    return (guild.id >> 22) % count


def guilds_in_shards(fake: FakeDiscord, count: int) -> list[Guild]:
    """A guild the bot is in for each shard of ``count`` (the home guild among them)."""
    found = {shard_of(fake.home, count): fake.home}
    for shard in set(range(count)) - set(found):
        found[shard] = fake.add_guild(f"Server {shard}", shard=(shard, count))
        found[shard].bot_in = True
    assert all(shard_of(g, count) == s for s, g in found.items())
    return [found[shard] for shard in range(count)]


async def test_each_shard_gets_only_its_guilds_and_their_events(fake: FakeDiscord) -> None:
    first, second = guilds_in_shards(fake, 2)
    fake.sessions.limit = StartLimit(max_concurrency=2)  # keys 0 and 1 identify together
    alice = fake.add_member("Alice", guild=second)
    channel = fake.add_text_channel("hobbs-cafe", guild=second)
    one, two = (
        Shards(fake, shard_ids=[0], shard_count=2),
        Shards(fake, shard_ids=[1], shard_count=2),
    )
    async with connected(one), connected(two):
        assert [g.id for g in one.guilds] == [first.id]
        assert [g.id for g in two.guilds] == [second.id]
        assert [i["shard"] for i in fake.identifies] == [[0, 2], [1, 2]]
        await fake.member_says(alice, channel["id"], "hello from shard one")
        await until(lambda: two.heard)
        assert [m.content for m in two.heard] == ["hello from shard one"]
        assert two.heard[0].guild is not None and two.heard[0].guild.id == second.id
        assert not one.heard
        assert fake.sessions.refused == []


async def test_more_than_2500_guilds_need_shards(fake: FakeDiscord) -> None:
    for n in range(2500):  # and the home guild: 2,501
        fake.add_guild(f"Server {n}", shard=(n % 3, 3)).bot_in = True
    plain = discord.Client(intents=discord.Intents.none())
    closed = await refused(plain)
    assert isinstance(closed, discord.ConnectionClosed) and closed.code == 4011
    sharded = Shards(fake)  # asks GET /gateway/bot how many shards
    async with connected(sharded):
        assert sharded.shard_count == 3  # a shard per 1,000 guilds
        assert len(sharded.guilds) == 2501
        counts = {s: sum(g.shard_id == s for g in sharded.guilds) for s in range(3)}
        assert all(0 < n <= 2500 for n in counts.values())
    assert fake.sessions.refused == [("Sharding required.", 0)]


async def test_identifies_of_one_bucket_5_seconds_apart(fake: FakeDiscord) -> None:
    guilds_in_shards(fake, 2)
    hasty = Shards(fake, paced=False, shard_count=2)  # max_concurrency 1: one bucket
    await hasty.login("test-token")
    running = asyncio.create_task(hasty.connect())
    try:
        # the second shard's IDENTIFY came in the first's 5 seconds: Invalid Session; it
        # identifies again, and is refused again, until the fake's clock is past the window
        await until(lambda: len(fake.sessions.refused) >= 2)
        assert set(fake.sessions.refused) == {("identified too soon", 1)}
        assert len(fake.sessions.live) == 1 and not hasty.is_ready()
        fake.clock.now += IDENTIFY_WINDOW_S  # type: ignore[attr-defined]
        await asyncio.wait_for(hasty.wait_until_ready(), 30)
        assert len(fake.sessions.live) == 2
    finally:
        await hasty.close()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await running
    await hasty.close()
    fake.clock.now += IDENTIFY_WINDOW_S  # type: ignore[attr-defined]
    patient = Shards(fake, shard_count=2)  # waits 5 s (of the fake's clock) between them
    fake.sessions.refused.clear()
    async with connected(patient):
        assert fake.sessions.refused == []
        assert patient.sleep.waits == [IDENTIFY_WINDOW_S]


async def test_past_the_days_session_starts_the_token_is_reset(fake: FakeDiscord) -> None:
    fake.sessions.limit = StartLimit(total=2, max_concurrency=1)
    first = Shards(fake, shard_count=2)
    async with connected(first) as running:
        limits = await first.fetch_session_start_limits()
        assert (limits.total, limits.remaining, limits.max_concurrency) == (2, 0, 1)
        assert 0 < limits.reset_after <= 24 * 3600 * 1000
        fake.clock.now += IDENTIFY_WINDOW_S  # type: ignore[attr-defined]
        late = discord.Client(intents=discord.Intents.none())
        closed = await refused(late)
        assert isinstance(closed, discord.ConnectionClosed) and closed.code == 4004
        # every session of the bot ended with it, and its token no longer works
        await until(lambda: running.done())
        assert isinstance(running.exception(), discord.ConnectionClosed)
    async with aiohttp.ClientSession() as http:
        headers = {"Authorization": "Bot test-token"}
        async with http.get(fake.api_base + "/users/@me", headers=headers) as answer:
            assert answer.status == 401


async def test_invalid_shard_and_intents_close_the_session(fake: FakeDiscord) -> None:
    beyond = Shards(fake, shard_ids=[2], shard_count=2)
    closed = await refused(beyond)
    assert isinstance(closed, discord.ConnectionClosed) and closed.code == 4010
    fake.sessions.privileged = 0  # the portal's Message Content switch off
    assert isinstance(await refused(Shards(fake)), discord.PrivilegedIntentsRequired)
    async with aiohttp.ClientSession() as http, http.ws_connect(fake.gateway_url) as ws:
        await ws.receive()  # HELLO
        unknown = 1 << 18
        assert not unknown & KNOWN_INTENTS and not discord.Intents.all().value & ~KNOWN_INTENTS
        await ws.send_json({"op": 2, "d": {"token": "test-token", "intents": unknown}})
        await ws.receive()
        assert ws.close_code == 4013


async def test_a_dropped_shard_resumes_with_what_it_missed(fake: FakeDiscord) -> None:
    _, second = guilds_in_shards(fake, 2)
    alice = fake.add_member("Alice", guild=second)
    channel = fake.add_text_channel("hobbs-cafe", guild=second)
    client = Shards(fake, shard_count=2)
    async with connected(client):
        (session,) = fake.sessions.of_shard(1)
        fake.sessions.drop(1)
        await fake.member_says(alice, channel["id"], "said while you were away")
        await fake.member_says(alice, channel["id"], "and again")
        await until(lambda: len(client.heard) == 2)
        assert [m.content for m in client.heard] == ["said while you were away", "and again"]
        assert fake.sessions.of_shard(1) == [session] and session.ws is not None
        assert len(fake.identifies) == 2  # a resume, not a new session
        assert fake.sessions.limit.used == 2


async def test_a_resume_of_an_unknown_session_is_invalid(fake: FakeDiscord) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(fake.gateway_url) as ws:
        await ws.receive()  # HELLO
        resume = {"token": "test-token", "session_id": "gone", "seq": 3}
        await ws.send_json({"op": 6, "d": resume})
        answer = json.loads((await ws.receive()).data)
        assert answer == {"op": 9, "d": False}

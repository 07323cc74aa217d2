"""``bottown gateway``: two gateway processes, a shard each, on the fake Discord; what members do
in a server with a town is stored as that town's input, and nothing is provisioned or run."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import col, select
from typer.testing import CliRunner

from adapters.discord.gateway import DiscordGateway
from adapters.discord.shards import ShardSet
from bot.cli.main import app
from bot.runtime.gateway import GatewayProcess
from bot.runtime.settings import load_settings
from bot.runtime.towns import open_town
from bot.runtime.watch import Watch
from bot.runtime.worker import Worker
from standins.discord.server import FakeDiscord
from standins.discord.sessions import StartLimit
from tests.adapters.discord.support import fake_discord, until
from tests.factories import MINITOWN, add_town
from town.store.db import Store
from town.store.models import ChannelLink, ChatLine, Community, WaitingInput


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    async with fake_discord(monkeypatch) as server:
        yield server


@contextlib.asynccontextmanager
async def gateway_process(
    store: Store, shard: int, count: int = 2
) -> AsyncIterator[GatewayProcess]:
    """A gateway process holding shard ``shard`` of ``count``, connected."""
    held = ShardSet.parse(str(shard), count)
    gateway = DiscordGateway("test-token", guild_ready_timeout=0.05, shards=held)
    process = GatewayProcess(store, gateway, Watch(store))
    up = asyncio.Event()
    running = asyncio.create_task(process.run(ready=up.set))
    waiting = asyncio.create_task(up.wait())
    await asyncio.wait({running, waiting}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if running.done():
        running.result()
    try:
        yield process
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


def found_town(store: Store, guild_id: int, name: str, channel: dict[str, Any]) -> int:
    """A community's town with its Hobbs Cafe linked to ``channel`` (as ``run`` left it)."""
    with store.session() as s:
        town = add_town(s, name)
        assert town.id is not None
        s.add(Community(platform="discord", key=str(guild_id), name=name, town_id=town.id))
        s.add(
            ChannelLink(
                town_id=town.id, platform="discord", area="Hobbs Cafe", channel_id=channel["id"]
            )
        )
        return town.id


def stored(store: Store) -> list[tuple[int, str, dict[str, Any]]]:
    with store.session() as s:
        rows = s.exec(select(WaitingInput).order_by(col(WaitingInput.id))).all()
        return [(r.town_id, r.kind, r.body) for r in rows]


async def test_members_doings_are_stored_for_their_servers_town(
    fake: FakeDiscord, store: Store
) -> None:
    fake.sessions.limit = StartLimit(max_concurrency=2)
    home_shard = (fake.home.id >> 22) % 2
    second = fake.add_guild("Second Server", shard=(1 - home_shard, 2))
    townless = fake.add_guild("No Town", shard=(home_shard, 2))
    second.bot_in = townless.bot_in = True
    cafes = [fake.add_text_channel("hobbs-cafe", guild=g) for g in (fake.home, second, townless)]
    alpha = found_town(store, fake.home.id, "Alpha", cafes[0])
    beta = found_town(store, second.id, "Beta", cafes[1])
    alice = fake.add_member("Alice", guild=second)
    bob = fake.add_member("Bob")
    fake.add_member("Bob", guild=townless, user=bob)

    async with gateway_process(store, 0) as zero, gateway_process(store, 1) as one:
        by_shard = {0: zero, 1: one}
        assert set(by_shard[home_shard].listening) == {fake.home.id}  # (not the townless one)
        assert set(by_shard[1 - home_shard].listening) == {second.id}
        said = await fake.member_says(alice, cafes[1]["id"], "hello <@123> Beta")
        await fake.member_says(bob, cafes[2]["id"], "nobody runs a town here")
        await fake.member_says(bob, cafes[0]["id"], "hello Alpha")
        assert await fake.member_reacts(alice, said, "👍")
        await until(lambda: len(stored(store)) == 3)
        # /town (uploaded by whoever provisioned the town) is answered, and says where
        fake.home.commands = [{"id": "1", "name": "town"}]
        token = await fake.slash(
            bob, cafes[0]["id"], "town", [{"name": "line", "type": 3, "value": "look"}]
        )
        answer = await until(lambda: fake.interactions[token].followups)
        assert "answered where it runs" in answer[-1]["content"]
        seen = (await by_shard[1 - home_shard].watch.metrics()).decode()
        assert "bottown_gateway_shards 1.0" in seen
        assert "bottown_gateway_servers_heard 1.0" in seen
        assert 'bottown_inputs_stored_total{kind="words",town="Beta"} 1.0' in seen
        assert 'bottown_inputs_stored_total{kind="reaction",town="Beta"} 1.0' in seen

    words = {town: body for town, kind, body in stored(store) if kind == "words"}
    assert set(words) == {alpha, beta}
    assert words[beta] == {
        "area": "Hobbs Cafe",
        "name": "Alice",
        "words": "hello @someone Beta",  # the adapter's own reading: a mention as people see it
        "platform": "discord",
        "user_id": alice["id"],
        "role": "",
        "replying_to": "",
    }
    assert words[alpha]["words"] == "hello Alpha"
    (reaction,) = [(town, body) for town, kind, body in stored(store) if kind == "reaction"]
    assert reaction == (
        beta,
        {
            "platform": "discord",
            "user_id": alice["id"],
            "name": "Alice",
            "message_id": said["id"],
            "emoji": "👍",
            "added": True,
        },
    )
    # a gateway makes nothing: no channel, no webhook, no command uploaded
    assert fake.calls_of("POST", r"/guilds/\d+/channels") == []
    assert fake.calls_of("POST", r"/channels/\d+/webhooks") == []
    assert fake.calls_of("PUT", r"/applications/\d+/guilds/\d+/commands") == []


async def test_the_command_refuses_what_discord_would(
    fake: FakeDiscord, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("BOTTOWN_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BOTTOWN_DISCORD_TOKEN", "test-token")
    fake.sessions.limit = StartLimit(total=1000, used=999)
    for args, said in (
        (["--shards", "0-3"], "--shards needs --shard-count"),
        (["--shards", "0-1", "--shard-count", "4"], "allows 1 more gateway session starts"),
    ):
        ran = await asyncio.to_thread(CliRunner().invoke, app, ["gateway", *args])
        assert ran.exit_code == 2, ran.output
        (last,) = [line for line in ran.output.splitlines() if line.startswith("error:")]
        assert said in last
    assert fake.identifies == [] and fake.token_valid


async def test_a_members_words_reach_the_town_a_worker_runs(
    fake: FakeDiscord, tmp_path: Path
) -> None:
    """Two processes' worth on one database: a gateway hears Alice, a headless worker's town
    takes her words in (on SQLite, woken by its poll)."""
    settings = load_settings(
        data_dir=tmp_path / "data", embedder="hash", brain="offline", lease_seconds=2.0
    )
    opened = await open_town(settings, "north", persona=str(MINITOWN), create=True)
    town_id = opened.town.id
    opened.services.close()
    store = Store(settings.resolved_database_url)
    cafe = fake.add_text_channel("hobbs-cafe")
    with store.session() as s:
        s.add(Community(platform="discord", key=str(fake.home.id), name="Home", town_id=town_id))
        s.add(
            ChannelLink(
                town_id=town_id, platform="discord", area="Hobbs Cafe", channel_id=cafe["id"]
            )
        )
    alice = fake.add_member("Alice")
    worker = Worker(settings, "w1", towns=["north"])
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        async with gateway_process(store, 0, count=1):
            await until(lambda: len(worker.held) == 1, within=60)
            await fake.member_says(alice, cafe["id"], "is anyone at the cafe?")

            def heard() -> list[str]:
                with store.session() as s:
                    query = select(ChatLine).where(
                        ChatLine.town_id == town_id, ChatLine.kind == "visitor"
                    )
                    return [f"{c.speaker}: {c.text}" for c in s.exec(query).all()]

            assert await until(heard, within=60) == ["Alice: is anyone at the cafe?"]
            assert stored(store) == []  # taken in, once
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)
        store.dispose()

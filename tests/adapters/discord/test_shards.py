"""The bot's gateway holding some of its shards: each shard's servers, IDENTIFYs at Discord's
pace (``max_concurrency``), and no more sessions started than the day's limit leaves."""

from __future__ import annotations

import pytest

from adapters.discord.gateway import DiscordGateway
from adapters.discord.shards import IDENTIFY_WINDOW_S, ShardSet
from standins.discord.server import FakeDiscord
from standins.discord.sessions import StartLimit
from tests.fakes.platform import Sleeps


def gateway(fake: FakeDiscord, shards: ShardSet) -> tuple[DiscordGateway, Sleeps]:
    sleep = Sleeps(fake.clock)  # type: ignore[arg-type]
    made = DiscordGateway(
        "test-token", guild_ready_timeout=0.05, shards=shards, clock=fake.clock, sleep=sleep
    )
    return made, sleep


def test_shards_are_read_as_ids_and_ranges() -> None:
    assert ShardSet.parse("0-3", 8).ids == (0, 1, 2, 3)
    assert ShardSet.parse("1,4-5", 8) == ShardSet((1, 4, 5), 8)
    assert ShardSet.parse(None, None) == ShardSet()
    assert ShardSet.parse("0-3", 8).sessions(recommended=1) == 4
    assert ShardSet().sessions(recommended=3) == 3
    for shards, count in (("0-8", 8), ("2", None), (None, 4), ("a-b", 2), ("-1", 2)):
        with pytest.raises(ValueError):
            ShardSet.parse(shards, count)


@pytest.mark.parametrize("concurrency", [1, 2])
async def test_shards_identify_at_discords_pace(fake: FakeDiscord, concurrency: int) -> None:
    fake.sessions.limit = StartLimit(max_concurrency=concurrency)
    other = fake.add_guild("Other", shard=(1 - (fake.home.id >> 22) % 2, 2))
    other.bot_in = True
    held, sleep = gateway(fake, ShardSet.parse("0-1", 2))
    await held.start()
    try:
        assert {g.id for g in held.guilds()} == {fake.home.id, other.id}
        assert sorted(i["shard"] for i in fake.identifies) == [[0, 2], [1, 2]]
        assert fake.sessions.refused == []  # never too soon
        # one bucket: the second shard waited out the first's 5 s; two: they went together
        assert sleep.waits == ([IDENTIFY_WINDOW_S] if concurrency == 1 else [])
    finally:
        await held.stop()


async def test_no_more_sessions_than_the_day_leaves(fake: FakeDiscord) -> None:
    fake.sessions.limit = StartLimit(total=1000, used=999)
    held, _ = gateway(fake, ShardSet.parse("0-1", 4))
    with pytest.raises(RuntimeError, match="allows 1 more gateway session starts today"):
        await held.start()
    assert fake.identifies == [] and fake.token_valid  # refused before Discord reset the token

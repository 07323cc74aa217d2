"""What the Discord adapter's tests share: the town's side of a test, and what to look for in the
fake Discord (``standins.discord.server.FakeDiscord``, which speaks Discord's REST API and
gateway on loopback; discord.py is pointed at it by its two base URLs)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import discord
import pytest
import yarl
from sqlmodel import select

from adapters.core.delivery import OutboxPump
from adapters.discord.adapter import DiscordAdapter
from standins.discord.server import FakeDiscord
from tests.factories import resident
from tests.fakes.platform import Clock, Sleeps
from town.store.models import (
    ChannelLink,
    Delivery,
    OutboxEvent,
    PendingInput,
    Resident,
    Town,
    Visitor,
)
from town.tick.heard import waiting
from town.tick.state import ResidentState

AREAS = {
    "Hobbs Cafe": "hobbs-cafe",
    "Rodriguez home": "rodriguez-home",
    "Mueller home": "mueller-home",
}


async def until(check: Callable[[], Any], within: float = 30.0) -> Any:
    """Wait for ``check()`` to be true (the gateway and the handlers are asynchronous)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not (result := check()):
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {check}")
        await asyncio.sleep(0.01)
    return result


@contextlib.asynccontextmanager
async def fake_discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    """The fake Discord on loopback, discord.py pointed at it by its two base URLs."""
    server = await FakeDiscord().start()
    monkeypatch.setattr(discord.http.Route, "BASE", server.api_base)
    monkeypatch.setattr(
        discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(server.gateway_url)
    )
    try:
        yield server
    finally:
        await server.stop()


def make_adapter(runtime: Any, fake: FakeDiscord | None = None, **options: Any) -> DiscordAdapter:
    """The adapter; given the fake, its pacing runs on the fake's clock (sleeps move it)."""
    if fake is not None:
        options.update(clock=fake.clock, sleep=Sleeps(fake.clock))
    return DiscordAdapter(
        runtime,
        runtime.store,
        runtime.town_id,
        token="test-token",
        guild_ready_timeout=0.05,
        **options,
    )


def links(runtime: Any) -> dict[str, ChannelLink]:
    with runtime.store.session() as s:
        rows = s.exec(select(ChannelLink).where(ChannelLink.platform == "discord")).all()
        return {row.area: row for row in rows}


def channel_of(runtime: Any, area: str) -> str:
    return links(runtime)[area].channel_id


def pump(runtime: Any, bot: DiscordAdapter, sleep: Sleeps | None = None) -> OutboxPump:
    """A pump on the adapter's clock: its sleeps move the fake's time too."""
    clock = bot.poster.bucket.clock
    time = clock if isinstance(clock, Clock) else None
    return OutboxPump(runtime.store, runtime.town_id, bot, sleep=sleep or Sleeps(time), clock=clock)


def add_event(runtime: Any, area: str, kind: str, resident: str, text: str) -> str:
    """An outbox row as a tick writes it; returns its key."""
    key = f"test:{len(text)}:{text[:20]}:{resident}"
    with runtime.store.session() as s:
        s.add(
            OutboxEvent(
                town_id=runtime.town_id,
                channel=area,
                kind=kind,
                payload={"resident": resident, "text": text},
                game_time=datetime(2023, 2, 13, 8, 0, tzinfo=UTC),
                idempotency_key=key,
            )
        )
    return key


def deliveries(runtime: Any) -> list[Delivery]:
    with runtime.store.session() as s:
        return list(s.exec(select(Delivery).where(Delivery.platform == "discord")).all())


def visitors(runtime: Any) -> set[str]:
    with runtime.store.session() as s:
        return {v.display_name for v in s.exec(select(Visitor)).all()}


def inbox(runtime: Any, name: str) -> list[str]:
    """What the resident has yet to perceive: its inbox, and visitors' words and pending inputs
    (a reaction to what it said) the next tick brings it."""
    row = resident(runtime.store, name)
    with runtime.store.session() as s:
        pending = s.exec(select(PendingInput.text).where(PendingInput.resident == name)).all()
        return ResidentState.of(row).inbox + waiting(s, runtime.town_id, row) + list(pending)


def paused(runtime: Any) -> bool:
    with runtime.store.session() as s:
        return bool(s.exec(select(Town)).one().paused)


async def morning(runtime: Any) -> None:
    """Four ticks: 07:30, Isabella and Klaus at the cafe, Maria asleep at the Muellers'."""
    for _ in range(4):
        await runtime.opened.engine.tick()
    with runtime.store.session() as s:
        where = {r.name: r.location for r in s.exec(select(Resident)).all()}
    assert where["Isabella Rodriguez"].startswith("Hobbs Cafe"), where
    assert where["Klaus Mueller"].startswith("Hobbs Cafe"), where
    assert where["Maria Lopez"].startswith("Mueller home"), where


def assert_no_mentions(message: dict[str, Any]) -> None:
    """Sent with mentions off (AllowedMentions.none()), and nobody would have been pinged."""
    allowed = message["body"]["allowed_mentions"]
    assert allowed["parse"] == [] and not allowed.get("users") and not allowed.get("roles")
    assert not allowed.get("replied_user") and message["pinged"] == []


def bot_messages(fake: FakeDiscord) -> list[dict[str, Any]]:
    return [m for m in fake.messages if m["author"]["id"] == str(fake.app_id)]

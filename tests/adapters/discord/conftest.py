"""The fake Discord, and an adapter started against it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import discord
import pytest
import yarl

from adapters.discord.adapter import DiscordAdapter
from standins.discord.server import FakeDiscord
from tests.adapters.discord.support import make_adapter


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    server = await FakeDiscord().start()
    monkeypatch.setattr(discord.http.Route, "BASE", server.api_base)
    monkeypatch.setattr(
        discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(server.gateway_url)
    )
    yield server
    await server.stop()


@pytest.fixture
async def adapter(runtime: Any, fake: FakeDiscord) -> AsyncIterator[DiscordAdapter]:
    bot = make_adapter(runtime, fake)
    await bot.start()
    runtime.adapters.append(bot)
    yield bot
    await bot.stop()

"""The fake Discord, and an adapter started against it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.discord.adapter import DiscordAdapter
from standins.discord.server import FakeDiscord
from tests.adapters.discord.support import fake_discord, make_adapter


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    async with fake_discord(monkeypatch) as server:
        yield server


@pytest.fixture
async def adapter(runtime: Any, fake: FakeDiscord) -> AsyncIterator[DiscordAdapter]:
    bot = make_adapter(runtime, fake)
    await bot.start()
    runtime.adapters.append(bot)
    yield bot
    await bot.stop()

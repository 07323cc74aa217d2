"""The fake Slack, and an adapter started against it in HTTP mode."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from adapters.slack.adapter import SlackAdapter
from bot.runtime.run import TownRuntime
from standins.slack.server import running_fake_slack
from standins.slack.workspace import FakeSlack
from tests.adapters.slack.support import ADMIN, MEMBER, make_adapter


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """slack_sdk reads http(s)_proxy in either case and ignores NO_PROXY."""
    for key in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with running_fake_slack() as fake:
        fake.add_user(MEMBER, "Alice Baker")
        fake.add_user(ADMIN, "Ada Owner", owner=True)
        yield fake


@pytest.fixture
async def adapter(runtime: TownRuntime, slack: FakeSlack) -> AsyncIterator[SlackAdapter]:
    """The adapter in HTTP mode, started (the town at its first minute: everyone at home)."""
    started = make_adapter(runtime, slack)
    await started.start()
    yield started
    await started.stop()

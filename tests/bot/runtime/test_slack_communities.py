"""Many Slack workspaces, one app: ``bot.runtime.slack_communities`` on the fake Slack (two
workspaces installing the app by OAuth) and the fake LLM, each founding its own town with
``/town found``; settings, nothing crossing between them, and an uninstall."""

from __future__ import annotations

import asyncio
import contextlib
import html
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from sqlmodel import col, select

from adapters.slack.workspaces import REDIRECT_PATH
from bot.runtime.live import default_platforms
from bot.runtime.scheduler import Timekeeper
from bot.runtime.settings import load_settings
from bot.runtime.slack_communities import SlackCommunities, serves_workspaces, workspaces_of
from bot.runtime.watch import Watch
from bot.runtime.wiring import Services
from standins.slack.events import event_callback, send, slash_command, uninstalled
from standins.slack.server import running_fake_slack
from standins.slack.workspace import CLIENT_ID, CLIENT_SECRET, SIGNING_SECRET, FakeSlack, Team
from tests.adapters.discord.support import until
from tests.bot.runtime.conftest import Prompts
from tests.factories import MINITOWN
from town.memory.vectors import ChromaIndex
from town.store.models import AuditEntry, ChatLine, Memory, Resident, Town

WORDS = "zanzibar marmalade"  # said in the first workspace only


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """slack_sdk reads http(s)_proxy in either case and ignores NO_PROXY."""
    for key in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(key, raising=False)


@dataclass
class Host:
    fake: FakeSlack
    communities: SlackCommunities
    now: list[datetime]
    answers: int = 0

    async def install(self, team: Team, admin: str) -> None:
        """The workspace's admin installs the app: the install page (its state cookie),
        Slack's authorize page, back to the app's redirect with a code."""
        self.fake.signed_in = (team.id, admin)
        async with aiohttp.ClientSession() as browser:
            async with browser.get(self.communities.workspaces.install_url) as page:
                assert page.status == 200
                cookie = page.headers["Set-Cookie"].split(";")[0]
                link = re.findall(r'href="([^"]+)"', await page.text())[-1]
            async with browser.get(html.unescape(link), allow_redirects=False) as approved:
                assert approved.status == 302, await approved.text()
                back = approved.headers["Location"]
            async with browser.get(back, headers={"Cookie": cookie}) as done:
                assert done.status == 200, await done.text()
        assert await self.communities.workspaces.bot_token(team.id) == team.token

    async def town(self, team: Team, user: str, line: str, channel: str = "") -> str:
        """``/town <line>`` typed in the workspace; the answer's text."""
        self.answers += 1
        name = f"answer-{self.answers}"
        channel = channel or self.fake.channel_id("general", team.id)
        body = slash_command(self.fake, team.id, user, channel, line, name)
        assert await send(self.fake, body, form=True) == 200
        await until(lambda: [r for r in self.fake.responses if r["name"] == name], within=120)
        return str(next(r for r in self.fake.responses if r["name"] == name)["text"])

    def town_id(self, team: Team) -> int:
        row = self.communities.rows.get(team.id)
        assert row is not None
        return row.town_id


@pytest.fixture
async def host(tmp_path: Path, llm: tuple[str, Prompts]) -> AsyncIterator[Host]:
    ChromaIndex.release_all()
    async with running_fake_slack() as fake:
        settings = load_settings(
            data_dir=tmp_path / "data",
            embedder="hash",
            brain="llm",
            llm_base_url=llm[0],
            llm_model="fake",
            community_personas=[str(MINITOWN)],
            tick_seconds=3600,  # the test ticks
            visitor_messages_per_minute=0,
            daily_token_budget=500_000,
            slack_client_id=CLIENT_ID,
            slack_client_secret=CLIENT_SECRET,
            slack_signing_secret=SIGNING_SECRET,
            slack_api_url=fake.api_url,
            slack_authorize_url=fake.authorize_url,
            slack_port=0,
        )
        services = Services.open(settings)
        now = [datetime(2026, 12, 1, tzinfo=UTC)]
        communities = SlackCommunities(
            settings,
            services,
            workspaces_of(settings, services.store.url),
            Watch(services.store),
            Timekeeper(services.store, settings),
            now=lambda: now[0],
        )
        running = asyncio.create_task(communities.run())
        await until(lambda: communities.workspaces.serving)
        fake.request_url = communities.workspaces.events_url
        fake.redirect_uris = [communities.workspaces.url(REDIRECT_PATH)]
        yield Host(fake, communities, now)
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        services.close()


def _workspace(fake: FakeSlack, name: str, admin: str, member: str) -> Team:
    team = fake.add_team(name)
    fake.add_user(admin, f"{name} Admin", admin=True, team=team.id)
    fake.add_user(member, f"{name} Member", team=team.id)
    fake.add_channel("general", team=team.id)
    return team


async def _morning(host: Host, team: Team) -> None:
    engine = host.communities.running[team.id].runtime.engine
    for _ in range(4):  # 07:30: Isabella at the cafe
        await engine.tick()


def _store_texts(host: Host, town_id: int) -> list[str]:
    with host.communities.services.store.session() as s:
        residents = s.exec(select(Resident.id).where(Resident.town_id == town_id)).all()
        memories = s.exec(select(Memory.text).where(col(Memory.resident_id).in_(residents)))
        chats = s.exec(select(ChatLine.text).where(ChatLine.town_id == town_id))
        audit = s.exec(select(AuditEntry.text).where(AuditEntry.town_id == town_id))
        return [*memories, *chats, *audit]


async def _says(host: Host, team: Team, user: str, channel: str, text: str) -> None:
    ts = host.fake.member_posted(channel, user, text)
    event = {"type": "message", "channel": channel, "user": user, "text": text, "ts": ts}
    assert await send(host.fake, event_callback(host.fake, team.id, event)) == 200


def _cafe(fake: FakeSlack, team: Team) -> str:
    """The workspace's Hobbs Cafe channel (its prefix: the town's name there)."""
    mine = [
        cid
        for cid, c in fake.channels.items()
        if c["context_team_id"] == team.id and c["name"].endswith("-hobbs-cafe")
    ]
    assert len(mine) == 1, mine
    return mine[0]


def _answered(fake: FakeSlack, channel: str) -> list[dict[str, Any]]:
    return [m for m in fake.messages if m["channel"] == channel and m.get("bot_id")]


async def test_two_workspaces_found_two_towns_and_nothing_crosses(
    host: Host, llm: tuple[str, Prompts]
) -> None:
    fake, prompts = host.fake, llm[1]
    first = _workspace(fake, "Acme", "UA0ADMIN", "UA0ZEPH")
    second = _workspace(fake, "Beta", "UB0ADMIN", "UB0ZEPH")
    await host.install(first, "UA0ADMIN")
    await host.install(second, "UB0ADMIN")
    assert first.token != second.token

    told = await host.town(first, "UA0ZEPH", "help")
    assert "no town yet" in told and "/town found" in told
    assert "Only a workspace admin or owner" in await host.town(first, "UA0ZEPH", "found")
    assert "is founded" in await host.town(first, "UA0ADMIN", "found")
    assert "is founded" in await host.town(second, "UB0ADMIN", "found")
    first_id, second_id = host.town_id(first), host.town_id(second)
    assert first_id != second_id
    for team in (first, second):  # each its own channels, made with its own token
        _cafe(fake, team)
        await _morning(host, team)
    made = {c.token for c in fake.called("conversations.create")}
    assert made == {first.token, second.token}

    cafe = _cafe(fake, first)
    await _says(host, first, "UA0ZEPH", cafe, f"Isabella, have you tried the {WORDS}?")
    await until(lambda: any(WORDS in p for p in prompts.seen), within=60)
    await until(lambda: _answered(fake, cafe), within=60)
    for _ in range(3):  # both live
        for team in (first, second):
            await host.communities.running[team.id].runtime.engine.tick()
    assert any(WORDS in t for t in _store_texts(host, first_id))

    before = len(prompts.seen)
    other_cafe = _cafe(fake, second)
    await _says(host, second, "UB0ZEPH", other_cafe, "Isabella, what have you heard lately?")
    await until(lambda: _answered(fake, other_cafe), within=60)
    for _ in range(3):
        await host.communities.running[second.id].runtime.engine.tick()
    assert len(prompts.seen) > before  # the second town thought too
    assert not [p for p in prompts.seen[before:] if WORDS in p]
    assert not [t for t in _store_texts(host, second_id) if WORDS in t]
    theirs = [
        m for m in fake.messages if fake.channels[m["channel"]]["context_team_id"] == second.id
    ]
    assert theirs and not [m for m in theirs if WORDS in str(m.get("text"))]
    posted = {c.token for c in fake.called("chat.postMessage") if c.params["channel"] == other_cafe}
    assert posted == {second.token}  # each workspace's posts with its own token
    index = host.communities.services.index
    with host.communities.services.store.session() as s:
        mine = set(s.exec(select(Memory.id).join(Resident).where(Resident.town_id == second_id)))
    ns = host.communities.settings.chroma_namespace
    assert set(index.ids(f"{ns}-t{second_id}").tolist()) <= mine  # its vectors, its memories


async def test_an_admin_changes_the_settings_and_a_member_is_refused(host: Host) -> None:
    team = _workspace(host.fake, "Acme", "UA0ADMIN", "UA0ZEPH")
    await host.install(team, "UA0ADMIN")
    assert "is founded" in await host.town(team, "UA0ADMIN", "found")
    first = host.communities.running[team.id].runtime

    assert await host.town(team, "UA0ZEPH", "settings budget 10") == "Only admins may use settings."
    shown = await host.town(team, "UA0ADMIN", "settings")
    assert "daily budget: 500000 tokens" in shown and "workspace admins and owners" in shown
    changed = await host.town(team, "UA0ADMIN", "settings budget 20000")
    assert "daily budget: 20000 tokens" in changed
    await until(
        lambda: (
            (live := host.communities.running.get(team.id)) is not None
            and live.runtime is not first
            and host.communities.workspaces.towns.get(team.id) in live.runtime.adapters
        )
    )  # the town runs again with it
    live = host.communities.running[team.id].runtime
    assert live.settings.daily_token_budget == 20000
    assert getattr(live.engine.llm.budget, "limit_tokens", None) == 20000


async def test_uninstalled_the_town_pauses_then_is_forgotten(host: Host) -> None:
    fake = host.fake
    stays = _workspace(fake, "Acme", "UA0ADMIN", "UA0ZEPH")
    leaves = _workspace(fake, "Beta", "UB0ADMIN", "UB0ZEPH")
    for team, admin in ((stays, "UA0ADMIN"), (leaves, "UB0ADMIN")):
        await host.install(team, admin)
        assert "is founded" in await host.town(team, admin, "found")
    gone = host.town_id(leaves)

    assert await uninstalled(fake, leaves.id) == [200, 200]
    await until(lambda: leaves.id not in host.communities.running)
    assert await host.communities.workspaces.bot_token(leaves.id) is None
    row = host.communities.rows.get(leaves.id)
    assert row is not None and row.removed_at == host.now[0]
    host.now[0] += timedelta(days=29)
    assert host.communities.forget_removed() == 0  # still waiting for a reinstall

    await host.install(leaves, "UB0ADMIN")  # installed again: it resumes, its wait over
    await until(lambda: leaves.id in host.communities.running)
    assert host.communities.rows.get(leaves.id).removed_at is None  # type: ignore[union-attr]
    await uninstalled(fake, leaves.id)
    await until(lambda: leaves.id not in host.communities.running)
    host.now[0] += timedelta(days=30)
    assert host.communities.forget_removed() == 1
    with host.communities.services.store.session() as s:
        assert s.get(Town, gone) is None
        assert not s.exec(select(Resident).where(Resident.town_id == gone)).all()
        assert s.get(Town, host.town_id(stays)) is not None  # the other town lives on
    assert stays.id in host.communities.running
    ns = host.communities.settings.chroma_namespace
    assert f"{ns}-t{gone}" not in host.communities.services.index.names()


def test_run_serves_many_workspaces_with_the_apps_oauth_settings(tmp_path: Path) -> None:
    one = load_settings(data_dir=tmp_path, slack_bot_token="xoxb-one")
    many = load_settings(data_dir=tmp_path, slack_client_id=CLIENT_ID)
    assert not serves_workspaces(one, ["slack"], None)  # one bot token: one workspace, as before
    assert serves_workspaces(many, ["slack"], None)
    assert not serves_workspaces(many, ["slack"], "smallville")  # a town named: that town
    assert not serves_workspaces(many, ["discord", "slack"], None)
    assert default_platforms(many) == ["slack"]
    with pytest.raises(ValueError, match="BOTTOWN_SLACK_CLIENT_SECRET"):
        workspaces_of(many, "sqlite:///unused.db")

"""Many Slack workspaces, one app: ``bottown run --platform slack`` with the app's OAuth
settings (``BOTTOWN_SLACK_CLIENT_ID``, ``..._CLIENT_SECRET``, ``..._SIGNING_SECRET``) serves a
town in every workspace that installs the app and founds one, as ``bot.runtime.communities``
does for Discord servers.

A workspace installs the app (``/slack/install``); ``/town`` there says how to found a town, and
``/town found [persona]`` by a workspace admin or owner (or an operator's ``BOTTOWN_ADMINS``)
founds it: its channels are made and it runs, calling Slack with the workspace's own bot token.
The app uninstalled (``app_uninstalled``, ``tokens_revoked``): the town pauses and, after
``BOTTOWN_FORGET_REMOVED_AFTER`` days, is forgotten whole (``bot.runtime.leaving``); installed
again before, it resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from adapters.core.ports import Adapter, Caller, Reply
from adapters.slack.adapter import SlackAdapter
from adapters.slack.workspaces import SlackWorkspaces
from bot.runtime.community_rows import CommunityRows
from bot.runtime.community_settings import TownChoices, settings_command
from bot.runtime.community_town import (
    CommunityTown,
    RunningTown,
    found,
    foundings,
    start_town,
    wanted_persona,
)
from bot.runtime.leaving import forget_removed, keep_forgetting
from bot.runtime.live import watch_served
from bot.runtime.run import TownRuntime
from bot.runtime.scheduler import Timekeeper
from bot.runtime.settings import Settings
from bot.runtime.towns import OpenTown, open_town
from bot.runtime.watch import Watch
from bot.runtime.wiring import Services
from town.store.models import Community, utcnow

log = logging.getLogger(__name__)

PLATFORM = "slack"


@dataclass
class SlackCommunities:
    """Every workspace's town on one app; ``run`` until cancelled."""

    settings: Settings
    services: Services
    workspaces: SlackWorkspaces
    watch: Watch
    keeper: Timekeeper
    now: Callable[[], datetime] = utcnow
    admins_are: str = "workspace admins and owners"
    ready: Callable[[TownRuntime], None] | None = None
    running: dict[str, RunningTown] = field(default_factory=dict)  # team id -> its live town
    # one change at a time to a workspace's town: installed, uninstalled, founded, restarted
    _locks: defaultdict[str, asyncio.Lock] = field(
        default_factory=lambda: defaultdict(asyncio.Lock)
    )
    _names: set[str] = field(default_factory=set)  # the names of towns being founded
    _founding: asyncio.Semaphore = field(default_factory=foundings)  # a few at once
    _work: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def rows(self) -> CommunityRows:
        return CommunityRows(self.services.store, PLATFORM)

    async def run(self) -> None:
        self.workspaces.desk = self.desk
        self.workspaces.on_team = self.team_changed
        await self.workspaces.start()
        try:
            installed = await self.workspaces.installed()
            for key in self.rows.present():  # uninstalled while this process was down
                if key not in installed:
                    await self.removed(key)
            for team in installed:
                try:
                    await self.joined(team)
                except Exception:  # one workspace's town must not keep the others down
                    log.exception("Slack: the town of the workspace %s did not start", team)
            await keep_forgetting(self.forget_removed)
        finally:
            for task in set(self._work):
                task.cancel()
            for team in list(self.running):
                await self.stop_town(team)
            await self.workspaces.stop()

    def _later(self, work: Callable[[], Any], name: str) -> None:
        """Work that outlasts Slack's 3 seconds for an answer, after the ack."""
        task = asyncio.create_task(work(), name=name)
        self._work.add(task)
        task.add_done_callback(self._work.discard)

    async def idle(self) -> None:
        """Wait until founding, resuming and restarting in hand are done (tests)."""
        while self._work:
            await asyncio.gather(*set(self._work), return_exceptions=True)

    # -- workspaces installing and uninstalling ----------------------------------------------

    async def team_changed(self, team: str, installed: bool) -> None:
        if installed:
            self._later(lambda: self.joined(team), f"installed {team}")
        else:
            await self.removed(team)

    async def joined(self, team: str) -> None:
        """The app is installed in ``team``: its town runs again, if it has one."""
        async with self._locks[team]:
            await self._join(team)

    async def _join(self, team: str) -> None:
        row = self.rows.get(team)
        token = await self.workspaces.bot_token(team)
        if team in self.running or row is None or token is None:
            return
        if row.removed_at is not None:
            log.info("Slack: installed again in %s; its town resumes", team)
            self.rows.save(row, removed_at=None)
        settings = self.town_settings_of(TownChoices.of(row.settings))
        opened = await open_town(settings, self.rows.town_name(row), services=self.services)
        await self._run(team, token, opened, row)

    async def removed(self, team: str) -> None:
        """The app was uninstalled: the town stops, forgotten after the setting's days."""
        async with self._locks[team]:
            row = self.rows.get(team)
            if row is not None and row.removed_at is None:
                self.rows.save(row, removed_at=self.now())
                days = self.settings.forget_removed_after
                log.info(
                    "Slack: uninstalled from %s; its town is paused, forgotten in %g days",
                    team,
                    days,
                )
            await self.stop_town(team)

    def forget_removed(self) -> int:
        return forget_removed(self.services, self.settings, self.now())

    # -- founding -------------------------------------------------------------------------

    def how_to_found(self) -> str:
        personas = ", ".join(self.settings.community_personas)
        return (
            "This workspace has no town yet. A workspace admin or owner founds one with "
            f"`/town found` ({self.settings.community_personas[0]}), or `/town found <persona>` "
            f"(here: {personas}). The app then makes a channel per place, and the residents "
            "(AI personas) wake at their hour."
        )

    async def desk(self, team: str, caller: Caller, line: str) -> Reply:
        """``/town <line>`` in a workspace with no town."""
        persona = wanted_persona(line, self.settings.community_personas)
        if persona is None:
            return Reply(self.how_to_found(), private=True)
        token = await self.workspaces.bot_token(team)
        if token is None:
            return Reply("The app is not installed here; install it first.", True, False)
        if not (caller.is_admin or f"{PLATFORM}:{caller.user_id}" in self.settings.admins):
            return Reply("Only a workspace admin or owner may found the town here.", True, ok=False)
        if isinstance(persona, Reply):
            return persona
        async with self._locks[team]:
            if self.rows.get(team) is not None:
                return Reply("This workspace has its town already.", True, ok=False)
            home = await self.workspaces.team_name(team)
            async with self._founding:
                return await self._found(team, home, token, persona)

    async def _found(self, team: str, home: str, token: str, persona: str) -> Reply:
        opened, row, name = await found(
            self.rows, self._names, self.settings, self.services, (team, home), persona
        )
        log.info("Slack: the workspace %s founded its town %r from %s", team, name, persona)
        await self._run(team, token, opened, row)
        return Reply(
            f"{name} is founded here: its places are channels of their own, and the residents "
            "wake at their hour. `/town help` lists the commands; `/town settings` shows this "
            "town's settings.",
            private=True,
        )

    # -- a town's run ----------------------------------------------------------------------

    def town_settings_of(self, choices: TownChoices) -> Settings:
        return choices.applied(self.settings)

    async def _run(self, team: str, token: str, opened: OpenTown, row: Community) -> None:
        assert row.id is not None
        choices = TownChoices.of(row.settings)
        runtime = CommunityTown(
            opened,
            self.town_settings_of(choices),
            watch=self.watch,
            community_id=row.id,
            admin_roles=frozenset(choices.admin_roles),
        )
        runtime.commands.table["settings"] = settings_command(self, runtime)
        await start_town(
            self.running,
            team,
            runtime,
            PLATFORM,
            keeper=self.keeper,
            make_adapter=lambda rt: self._adapter(rt, team, token),
            ready=self.ready,
        )

    def _adapter(self, runtime: TownRuntime, team: str, token: str) -> Adapter:
        return SlackAdapter(
            runtime,
            runtime.store,
            runtime.town_id,
            bot_token=token,
            api_url=self.settings.slack_api_url,
            shared=self.workspaces,
            team_id=team,
        )

    async def stop_town(self, team: str) -> None:
        live = self.running.pop(team, None)
        if live is None:
            return
        live.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await live.task

    # -- the settings' keeper (``bot.runtime.community_settings.Keeper``) ---------------------

    def community_by_town(self, town_id: int) -> Community:
        return self.rows.by_town(town_id)

    def choose(self, town_id: int, choices: TownChoices) -> None:
        self.rows.save(self.community_by_town(town_id), settings=choices.stored())

    async def restart_soon(self, town_id: int) -> None:
        team = self.community_by_town(town_id).key
        self._later(lambda: self._restart(team), f"restart {team}")

    async def _restart(self, team: str) -> None:
        async with self._locks[team]:
            await self.stop_town(team)
            await self._join(team)

    def role_names(self, town_id: int, role_ids: tuple[str, ...]) -> list[str]:
        return list(role_ids)  # Slack has no roles: none is ever named


def serves_workspaces(settings: Settings, platforms: list[str], town: str | None) -> bool:
    """``bottown run --platform slack`` with the app's client id and no town named."""
    return platforms == [PLATFORM] and town is None and settings.slack_client_id is not None


def workspaces_of(settings: Settings, database_url: str) -> SlackWorkspaces:
    if settings.slack_client_secret is None or settings.slack_signing_secret is None:
        raise ValueError(
            "many Slack workspaces need BOTTOWN_SLACK_CLIENT_SECRET and "
            "BOTTOWN_SLACK_SIGNING_SECRET beside BOTTOWN_SLACK_CLIENT_ID (see the README)"
        )
    assert settings.slack_client_id is not None
    return SlackWorkspaces(
        client_id=settings.slack_client_id,
        client_secret=settings.slack_client_secret.get_secret_value(),
        signing_secret=settings.slack_signing_secret.get_secret_value(),
        database_url=database_url,
        redirect_uri=settings.slack_redirect_uri,
        host=settings.slack_host,
        port=settings.slack_port,
        api_url=settings.slack_api_url,
        authorize_url=settings.slack_authorize_url,
    )


async def serve_workspaces(
    settings: Settings, *, ready: Callable[[TownRuntime], None] | None = None
) -> None:
    """Every workspace's town on one app, until cancelled."""
    services = Services.open(settings)
    try:
        workspaces = workspaces_of(settings, services.store.url)
        watch = Watch(services.store)
        keeper = Timekeeper(services.store, settings)
        try:
            async with watch_served(watch, settings):
                await SlackCommunities(
                    settings, services, workspaces, watch, keeper, ready=ready
                ).run()
        finally:
            await keeper.close()
    finally:
        services.close()

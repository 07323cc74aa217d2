"""Many communities, one bot: ``bottown run --platform discord`` on one gateway connection,
a town per Discord server that founded one.

A server with no town gets a ``/town`` that says how to found one; ``/town found [persona]``
(a member with Manage Server, one holding the role named ``BOTTOWN_FOUNDER_ROLE``, or an
operator's ``BOTTOWN_ADMINS``) founds it from a persona the
operator made available (``BOTTOWN_COMMUNITY_PERSONAS``), its channels are made and it runs.
Each town is a ``Community`` row keyed by the server's id, with the settings its admins chose
(``bot.runtime.community_settings``); every town shares this process's store, vector index,
LLM pacer and tick scheduler, and nothing else: its own brain and budget, its own members.

The bot removed from a server: its town stops (paused) and the row says since when; invited
back, it resumes; after ``BOTTOWN_FORGET_REMOVED_AFTER`` days it is forgotten whole
(``bot.runtime.leaving``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import discord

from adapters.core.ports import Adapter, Caller, Reply
from adapters.discord.adapter import DiscordAdapter
from adapters.discord.gateway import DiscordGateway
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
from bot.runtime.consent import leaving_forgets
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

PLATFORM = "discord"


@dataclass
class Communities:
    """Every server's town on one gateway; ``run`` until cancelled."""

    settings: Settings
    services: Services
    gateway: DiscordGateway
    watch: Watch
    keeper: Timekeeper
    now: Callable[[], datetime] = utcnow
    admins_are: str = "members with Manage Server"
    ready: Callable[[TownRuntime], None] | None = None
    running: dict[int, RunningTown] = field(default_factory=dict)  # guild id -> its live town
    # one change at a time to a server's town: joined, removed, founded, restarted
    _locks: defaultdict[int, asyncio.Lock] = field(
        default_factory=lambda: defaultdict(asyncio.Lock)
    )
    _names: set[str] = field(default_factory=set)  # the names of towns being founded
    _founding: asyncio.Semaphore = field(default_factory=foundings)  # a few at once
    _restarts: set[asyncio.Task[None]] = field(default_factory=set)

    async def run(self) -> None:
        self.gateway.on_guild = self.guild_changed
        await self.gateway.start()
        try:
            present = self.gateway.guilds()
            await self.removed_while_away({g.id for g in present})
            for guild in present:
                try:
                    await self.joined(guild)
                except Exception:  # one server's town must not keep the others down
                    log.exception("Discord: the town of the server %s did not start", guild.id)
            await keep_forgetting(self.forget_removed)
        finally:
            for guild_id in list(self.running):
                await self.stop_town(guild_id)
            await self.gateway.stop()

    # -- servers joining and leaving --------------------------------------------------------

    async def guild_changed(self, guild: discord.Guild, joined: bool) -> None:
        if joined:
            await self.joined(guild)
        else:
            await self.removed(guild.id)

    async def joined(self, guild: discord.Guild) -> None:
        """The bot is in ``guild`` (at start, or invited): its town runs again, or ``/town``
        there says how to found one."""
        async with self._locks[guild.id]:
            await self._join(guild)

    async def _join(self, guild: discord.Guild) -> None:
        if guild.id in self.running:
            return
        row = self.community(guild.id)
        if row is None:
            await self.gateway.offer(guild, self.desk)
            return
        if row.removed_at is not None:
            log.info("Discord: invited back to %r; its town resumes", guild.name)
            self._save(row, removed_at=None, name=guild.name)
        opened = await open_town(
            self.town_settings(row), self._town_name(row), services=self.services
        )
        await self._run(guild, opened, row)

    async def removed(self, guild_id: int) -> None:
        """The bot was removed from the server: its town stops, and is forgotten after
        ``forget_removed_after`` days unless the bot is invited back."""
        async with self._locks[guild_id]:
            await self._remove(guild_id)

    async def _remove(self, guild_id: int) -> None:
        row = self.community(guild_id)
        if row is not None and row.removed_at is None:  # kept before the town stops
            self._save(row, removed_at=self.now())
            days = self.settings.forget_removed_after
            log.info(
                "Discord: removed from the server %s; its town is paused, forgotten in %g days",
                guild_id,
                days,
            )
        await self.stop_town(guild_id)

    async def removed_while_away(self, present: set[int]) -> None:
        """Servers with a town that removed the bot while this process was down (Discord tells
        a bot of a removal only while it is connected)."""
        for key in self.rows.present():
            if int(key) not in present:
                await self.removed(int(key))

    def forget_removed(self) -> int:
        """Forget the towns of servers the bot left more than the setting's days ago."""
        return forget_removed(self.services, self.settings, self.now())

    # -- founding -------------------------------------------------------------------------

    def how_to_found(self) -> str:
        personas = ", ".join(self.settings.community_personas)
        role = self.settings.founder_role
        who = f"Manage Server or the role @{role}" if role else "Manage Server"
        return (
            f"This server has no town yet. A member with {who} founds one with "
            f"`/town line:found` ({self.settings.community_personas[0]}), or "
            f"`/town line:found <persona>` (here: {personas}). The bot then makes a category "
            "of channels, one per place, and the residents (AI personas) wake at their hour."
        )

    async def desk(self, guild: discord.Guild, caller: Caller, line: str) -> Reply:
        """``/town <line>`` in a server with no town."""
        persona = wanted_persona(line, self.settings.community_personas)
        if persona is None:
            return Reply(self.how_to_found(), private=True)
        if not self.may_found(guild, caller):
            role = self.settings.founder_role
            who = f"Manage Server or the role @{role}" if role else "Manage Server"
            return Reply(f"Only a member with {who} may found the town here.", True, ok=False)
        if isinstance(persona, Reply):
            return persona
        async with self._locks[guild.id]:
            if self.community(guild.id) is not None:
                return Reply("This server has its town already.", True, ok=False)
            async with self._founding:
                return await self._found(guild, persona)

    def may_found(self, guild: discord.Guild, caller: Caller) -> bool:
        """Manage Server, the founder role of the settings (by name, as the server made it),
        or one of the operator's admins."""
        if caller.is_admin or f"{caller.platform}:{caller.user_id}" in self.settings.admins:
            return True
        wanted = self.settings.founder_role.strip().lower()
        held = (guild.get_role(int(r)) for r in caller.roles if r.isdigit())
        return bool(wanted) and any(r is not None and r.name.lower() == wanted for r in held)

    async def _found(self, guild: discord.Guild, persona: str) -> Reply:
        community = (str(guild.id), guild.name)
        opened, row, name = await found(
            self.rows, self._names, self.settings, self.services, community, persona
        )
        log.info("Discord: %r founded its town %r from %s", guild.name, name, persona)
        await self._run(guild, opened, row)
        return Reply(
            f"{name} is founded here: its places are the channels of the category {name!r}, "
            "and the residents wake at their hour. `/town line:help` lists the commands; "
            "`/town line:settings` shows this town's settings.",
            private=True,
        )

    # -- a town's run ----------------------------------------------------------------------

    def town_settings(self, row: Community) -> Settings:
        return self.town_settings_of(TownChoices.of(row.settings))

    def town_settings_of(self, choices: TownChoices) -> Settings:
        """The operator's settings with the community's choices, within the operator's
        ceilings."""
        return choices.applied(self.settings)

    async def _run(self, guild: discord.Guild, opened: OpenTown, row: Community) -> None:
        """Run the town in its server until ``stop_town``; returns once it is up."""
        assert row.id is not None
        choices = TownChoices.of(row.settings)
        settings = self.town_settings_of(choices)
        runtime = CommunityTown(
            opened,
            settings,
            watch=self.watch,
            community_id=row.id,
            admin_roles=frozenset(choices.admin_roles),
        )
        runtime.commands.table["settings"] = settings_command(self, runtime)
        await start_town(
            self.running,
            guild.id,
            runtime,
            PLATFORM,
            keeper=self.keeper,
            make_adapter=lambda rt: self._adapter(rt, guild.id),
            ready=self.ready,
        )

    def _adapter(self, runtime: TownRuntime, guild_id: int) -> Adapter:
        return DiscordAdapter(
            runtime,
            runtime.store,
            runtime.town_id,
            gateway=self.gateway,
            guild_id=guild_id,
            member_departures="leave" in leaving_forgets(self.settings.forget_on_leave),
        )

    async def stop_town(self, guild_id: int) -> None:
        live = self.running.pop(guild_id, None)
        if live is None:
            return
        live.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await live.task

    async def restart_soon(self, town_id: int) -> None:
        """Run the town again with its stored choices (a changed budget, admin roles), once
        the command that changed them has answered."""
        row = self.community_by_town(town_id)
        task = asyncio.create_task(self._restart(int(row.key)), name=f"restart {row.key}")
        self._restarts.add(task)
        task.add_done_callback(self._restarts.discard)

    async def _restart(self, guild_id: int) -> None:
        async with self._locks[guild_id]:
            guild = self.gateway.client.get_guild(guild_id)
            await self.stop_town(guild_id)
            if guild is not None:
                await self._join(guild)

    def role_names(self, town_id: int, role_ids: tuple[str, ...]) -> list[str]:
        """The roles' names in the town's server (the id of one it no longer has)."""
        guild = self.gateway.client.get_guild(int(self.community_by_town(town_id).key))
        found = [guild.get_role(int(r)) if guild else None for r in role_ids]
        return [f"@{r.name}" if r else rid for r, rid in zip(found, role_ids, strict=True)]

    # -- the store --------------------------------------------------------------------------

    @property
    def rows(self) -> CommunityRows:
        return CommunityRows(self.services.store, PLATFORM)

    def community(self, guild_id: int) -> Community | None:
        return self.rows.get(str(guild_id))

    def town_id_of(self, guild_id: int) -> int:
        row = self.community(guild_id)
        if row is None:
            raise LookupError(f"the server {guild_id} has no town")
        return row.town_id

    def community_by_town(self, town_id: int) -> Community:
        return self.rows.by_town(town_id)

    def choose(self, town_id: int, choices: TownChoices) -> None:
        """Store a community's changed choices."""
        self.rows.save(self.community_by_town(town_id), settings=choices.stored())

    def _town_name(self, row: Community) -> str:
        return self.rows.town_name(row)

    def _save(self, row: Community, **changes: object) -> None:
        self.rows.save(row, **changes)


def serves_communities(settings: Settings, platforms: list[str], town: str | None) -> bool:
    """``bottown run --platform discord`` with no town named and no server pinned
    (``BOTTOWN_DISCORD_GUILD_ID`` keeps one town in one server, as before)."""
    return platforms == [PLATFORM] and town is None and settings.discord_guild_id is None


async def serve_communities(
    settings: Settings, *, ready: Callable[[TownRuntime], None] | None = None
) -> None:
    """Every server's town on one gateway, until cancelled."""
    if settings.discord_token is None:
        raise ValueError("--platform discord needs BOTTOWN_DISCORD_TOKEN (see the README)")
    services = Services.open(settings)
    try:
        watch = Watch(services.store)
        keeper = Timekeeper(services.store, settings)
        gateway = DiscordGateway(
            settings.discord_token.get_secret_value(),
            message_content=settings.discord_message_content,
            member_departures="leave" in leaving_forgets(settings.forget_on_leave),
        )
        try:
            async with watch_served(watch, settings):
                await Communities(settings, services, gateway, watch, keeper, ready=ready).run()
        finally:
            await keeper.close()
    finally:
        services.close()

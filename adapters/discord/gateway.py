"""One gateway for every server the bot is in (or those of its ``shards``): discord.py's sharded
client, logged in once, each event handed to the town of the server it came from (``Town``: a
town's adapter), and a ``/town`` that answers in a server with no town yet (``Desk``: founding
one).

Servers join and leave while it runs: ``on_guild`` is told (the server, joined or not), and the
bot layer founds, resumes or pauses that server's town.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import discord
from discord import app_commands
from discord.shard import SessionStartLimits

from adapters.core.ports import Caller, Reply
from adapters.discord.client import NO_MENTIONS, TownClient
from adapters.discord.departures import Departing
from adapters.discord.errors import NETWORK_ERRORS
from adapters.discord.poster import send_answer
from adapters.discord.shards import EVERY_SHARD, IdentifyPacer, ShardSet, check_start_limit

log = logging.getLogger(__name__)

PLATFORM = "discord"


class Town(Protocol):
    """A town's adapter, as the gateway hands it its server's events."""

    @property
    def departures(self) -> Departing: ...

    async def on_message(self, message: discord.Message) -> None: ...

    async def on_reaction(self, event: discord.RawReactionActionEvent) -> None: ...

    def deleted(self, message_id: int) -> None: ...

    async def confirmed(self, interaction: discord.Interaction[Any], line: str) -> None: ...


# a server without a town: what ``/town <line>`` answers there (the caller, the line)
Desk = Callable[[discord.Guild, Caller, str], Awaitable[Reply]]


def caller_of(user: discord.User | discord.Member, area: str | None) -> Caller:
    """Who typed a command: an admin with Manage Server; their roles, for the town's own
    admin roles (``Caller.roles``)."""
    if not isinstance(user, discord.Member):
        return Caller(PLATFORM, str(user.id), user.display_name, False, area)
    admin = user.guild_permissions.manage_guild
    roles = tuple(str(r.id) for r in user.roles)
    return Caller(PLATFORM, str(user.id), user.display_name, admin, area, roles=roles)


class DiscordGateway(Departing):
    """The bot's one connection: logs in, connects, routes each server's events to its town."""

    def __init__(
        self,
        token: str,
        *,
        message_content: bool = True,
        member_departures: bool = False,
        guild_ready_timeout: float = 2.0,
        connect_timeout: float = 60.0,
        shards: ShardSet = EVERY_SHARD,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.message_content, self.connect_timeout = message_content, connect_timeout
        self.shards = shards
        self._token = token
        intents = discord.Intents.none()
        intents.guilds = True
        intents.guild_messages = True
        intents.message_content = message_content
        intents.moderation = True  # bans and kicks (a kick is seen in the audit log)
        intents.members = member_departures  # privileged: only to forget members who leave
        intents.guild_reactions = True  # members' reactions to residents' messages: ratings
        self.client = TownClient(
            self._on_message,
            intents,
            guild_ready_timeout,
            self._deleted,
            self,
            on_reaction=self._on_reaction,
            on_guild=self._on_guild,
            shards=shards,
            pacer=IdentifyPacer(clock, sleep),
        )
        self.client.confirmed = self._confirmed
        self.towns: dict[int, Town] = {}  # guild id -> its town's adapter
        self.on_guild: Callable[[discord.Guild, bool], Awaitable[None]] | None = None
        self._task: asyncio.Task[None] | None = None

    # -- life ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Log in and connect; returns once READY came (every server's GUILD_CREATE, or the
        client's wait for them, is over)."""
        try:
            try:
                await self.client.login(self._token)
            except discord.LoginFailure as exc:
                raise RuntimeError(
                    "Discord rejected the bot token: check BOTTOWN_DISCORD_TOKEN (the Bot page "
                    "of the Developer Portal, Reset Token)"
                ) from exc
            await self._mind_the_start_limit()
            self._task = asyncio.create_task(self.client.connect(), name="discord-gateway")
            self._task.add_done_callback(_gateway_ended)
            await self._wait_ready(self._task)
        except BaseException:
            await self.stop()
            raise

    async def _mind_the_start_limit(self) -> None:
        """Discord's session start limit: enough left for this process's shards, and how many
        may identify together."""
        recommended, _, limit = await self.client.http.get_bot_gateway()
        limits = SessionStartLimits(**limit)
        check_start_limit(limits, self.shards.sessions(recommended))
        self.client.pacer.max_concurrency = limits.max_concurrency

    async def stop(self) -> None:
        await self.client.close()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    @property
    def started(self) -> bool:
        return self._task is not None

    def guilds(self) -> list[discord.Guild]:
        return sorted(self.client.guilds, key=lambda g: g.id)

    async def _wait_ready(self, gateway: asyncio.Task[None]) -> None:
        ready = asyncio.create_task(self.client.wait_until_ready())
        done, _ = await asyncio.wait(
            {gateway, ready}, timeout=self.connect_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if ready in done:
            return
        ready.cancel()
        if gateway not in done:
            raise TimeoutError(f"Discord: no READY from the gateway in {self.connect_timeout} s")
        error = gateway.exception()
        if isinstance(error, discord.PrivilegedIntentsRequired):
            raise RuntimeError(
                "Discord refused the message_content intent: turn on 'Message Content Intent' "
                "for the bot in the Developer Portal, or set "
                "BOTTOWN_DISCORD_MESSAGE_CONTENT=false (then: mentions and slash commands only)"
            ) from error
        raise RuntimeError(f"Discord: the gateway connection ended: {error!r}") from error

    # -- a server without a town -----------------------------------------------------------

    async def offer(self, guild: discord.Guild, desk: Desk) -> None:
        """``/town`` in a server with no town: ``desk`` answers it (how to found one, or the
        founding itself). Uploaded at once; a town founded there registers its own."""
        tree = self.client.tree

        @app_commands.command(name="town", description="Talk to the town (try: help)")
        @app_commands.describe(line="found [persona], or help")
        async def town(interaction: discord.Interaction[TownClient], line: str = "help") -> None:
            await interaction.response.defer(ephemeral=True, thinking=True)
            caller = caller_of(interaction.user, None)
            try:
                reply = await desk(guild, caller, line)
            except Exception:
                log.exception("Discord: /town in the server %s failed", guild.id)
                reply = Reply("Something went wrong; it is in the bot's log.", True, False)
            await send_answer(interaction.followup.send, reply.text, ephemeral=True)

        tree.clear_commands(guild=guild)
        tree.add_command(town, guild=guild)
        try:
            await tree.sync(guild=guild)
        except discord.Forbidden:
            log.warning("Discord: no permission to register /town in the server %s", guild.id)

    # -- routing: each event to its server's town ---------------------------------------------

    def _town(self, guild_id: int | None) -> Town | None:
        return self.towns.get(guild_id) if guild_id is not None else None

    async def _on_guild(self, guild: discord.Guild, joined: bool) -> None:
        if self.on_guild is not None:
            await self.on_guild(guild, joined)

    async def _on_message(self, message: discord.Message) -> None:
        town = self._town(message.guild.id if message.guild else None)
        if town is not None:
            await town.on_message(message)

    async def _on_reaction(self, event: discord.RawReactionActionEvent) -> None:
        town = self._town(event.guild_id)
        if town is not None:
            await town.on_reaction(event)

    def _deleted(self, message_id: int) -> None:
        for town in self.towns.values():  # ids are unique across servers
            town.deleted(message_id)

    async def _confirmed(
        self, interaction: discord.Interaction[Any], line: str, guild_id: int | None
    ) -> None:
        town = self._town(guild_id or interaction.guild_id)
        if town is None and guild_id is None and len(self.towns) == 1:  # a button of before
            town = next(iter(self.towns.values()))
        if town is not None:
            await town.confirmed(interaction, line)
            return
        with contextlib.suppress(discord.HTTPException, *NETWORK_ERRORS):
            await interaction.response.send_message(
                "No town here any more.", ephemeral=True, allowed_mentions=NO_MENTIONS
            )

    async def on_member_ban(self, guild: discord.Guild, user: discord.abc.User) -> None:
        if (town := self._town(guild.id)) is not None:
            await town.departures.on_member_ban(guild, user)

    async def on_audit_log_entry_create(self, entry: discord.AuditLogEntry) -> None:
        if (town := self._town(entry.guild.id)) is not None:
            await town.departures.on_audit_log_entry_create(entry)

    async def on_raw_member_remove(self, payload: discord.RawMemberRemoveEvent) -> None:
        if (town := self._town(payload.guild_id)) is not None:
            await town.departures.on_raw_member_remove(payload)


def _gateway_ended(task: asyncio.Task[None]) -> None:
    """discord.py reconnects by itself; it gives up only on errors a restart cannot fix."""
    if not task.cancelled() and task.exception() is not None:
        log.error("Discord: the gateway connection ended for good", exc_info=task.exception())

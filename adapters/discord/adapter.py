"""The town in a Discord server, through discord.py.

Every town location is a text channel in one category named after the town
(``adapters.discord.channels``); residents post there through the channel's webhook under their
own names (``adapters.discord.poster``); members' messages and commands reach the town through
``adapters.discord.inbound``. This module connects, picks the guild and wires the three.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import discord

from adapters.core.links import ChannelLinks
from adapters.core.ports import Outgoing, TownPort
from adapters.discord.channels import LocationChannels
from adapters.discord.client import TownClient
from adapters.discord.departures import Departures
from adapters.discord.errors import NETWORK_ERRORS
from adapters.discord.inbound import PLATFORM, Inbound
from adapters.discord.pacing import ServerBucket
from adapters.discord.poster import (
    DEFAULT_AVATAR,
    MAX_CHARS,
    MIN_INTERVAL_S,
    WebhookPoster,
    webhook_name,
)
from adapters.discord.proxies import ProxyWatch
from town.features.ratings.reactions import Reacted
from town.store.db import Store

log = logging.getLogger(__name__)


class DiscordAdapter:
    """One town in one Discord server (guild)."""

    name = PLATFORM
    max_chars = MAX_CHARS
    min_interval_s = MIN_INTERVAL_S

    def __init__(
        self,
        port: TownPort,
        store: Store,
        town_id: int,
        *,
        token: str,
        guild_id: int | None = None,
        message_content: bool = True,
        member_departures: bool = False,
        avatar_url: str | None = DEFAULT_AVATAR,
        guild_ready_timeout: float = 2.0,
        connect_timeout: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.port = port
        self.guild_id, self.message_content = guild_id, message_content
        self.connect_timeout = connect_timeout
        self._token = token
        intents = discord.Intents.none()
        intents.guilds = True
        intents.guild_messages = True
        intents.message_content = message_content
        intents.moderation = True  # bans and kicks (a kick is seen in the audit log)
        intents.members = member_departures  # privileged: only to forget members who leave
        intents.guild_reactions = True  # members' reactions to residents' messages: ratings
        self.proxies = ProxyWatch(sleep=sleep)
        self.departures = Departures(port, guild_id)
        self.client = TownClient(
            self._on_message,
            intents,
            guild_ready_timeout,
            self.proxies.deleted,
            self.departures,
            on_reaction=self._on_reaction,
        )
        links = ChannelLinks(store, town_id, PLATFORM)
        self.channels = LocationChannels(self.client, port, links, webhook_name(port.town_name))
        bucket = ServerBucket(clock=clock, sleep=sleep)  # the server-wide webhook bucket
        self.poster = WebhookPoster(self.channels, port, avatar_url, bucket)
        self.inbound = Inbound(port, self.client, self.channels, links, self.proxies)
        self.client.confirmed = self.inbound.confirmed
        self._gateway: asyncio.Task[None] | None = None

    @property
    def guild(self) -> discord.Guild | None:
        return self.channels.guild

    async def _on_message(self, message: discord.Message) -> None:
        await self.inbound.on_message(message)

    async def _on_reaction(self, event: discord.RawReactionActionEvent) -> None:
        me = self.client.user
        if me is not None and event.user_id == me.id:
            return  # the bot's own reactions (it never rates)
        if event.member is not None and event.member.bot:
            return
        emoji = event.emoji
        name = emoji.name if emoji.is_unicode_emoji() else f":{emoji.name}:"
        await self.port.reacted(
            Reacted(
                PLATFORM,
                str(event.user_id),
                event.member.display_name if event.member is not None else "",
                str(event.message_id),
                name or "",
                added=event.event_type == "REACTION_ADD",
            )
        )

    async def typing(self, area: str, author: str) -> None:
        """The channel's typing indicator (Discord shows the bot typing, for about 10 s or
        until the reply arrives); best effort."""
        channel = self.channels.text_channel(area)
        if channel is None:
            return
        try:
            await channel.typing()
        except (discord.HTTPException, *NETWORK_ERRORS) as exc:
            log.debug("Discord: no typing indicator in %s: %r", area, exc)

    async def send(self, message: Outgoing) -> str:
        await self.channels.ensure(message.area)  # a place a live update added
        return await self.poster.send(message)

    # -- life ------------------------------------------------------------------------------

    async def start(self) -> None:
        try:
            try:
                await self.client.login(self._token)
            except discord.LoginFailure as exc:
                raise RuntimeError(
                    "Discord rejected the bot token: check BOTTOWN_DISCORD_TOKEN (the Bot page "
                    "of the Developer Portal, Reset Token)"
                ) from exc
            self._gateway = asyncio.create_task(self.client.connect(), name="discord-gateway")
            self._gateway.add_done_callback(_gateway_ended)
            await self._wait_ready(self._gateway)
            guild = self._pick_guild()
            self.departures.guild_id = guild.id
            await self.channels.provision(guild)
            await self.proxies.look(guild)
            await self.inbound.sync_commands(guild)
        except BaseException:
            await self.stop()
            raise
        intent = "on" if self.message_content else "off"
        log.info("Discord: the town lives in %r (message_content intent %s)", self.guild, intent)

    async def stop(self) -> None:
        await self.poster.close()
        await self.client.close()
        if self._gateway is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._gateway
            self._gateway = None

    def status_line(self) -> str:
        guild = self.guild.name if self.guild else "(not connected)"
        intent = "on" if self.message_content else "off (mentions and slash commands only)"
        line = f"Discord: guild {guild}, message_content intent {intent}"
        if self.channels.problems:
            line += "; " + "; ".join(self.channels.problems)
        if self.poster.problem:
            line += f"; posting PAUSED: {self.poster.problem}"
        return line

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

    def _pick_guild(self) -> discord.Guild:
        if self.guild_id is not None:
            guild = self.client.get_guild(self.guild_id)
            if guild is None:
                raise RuntimeError(
                    f"the bot is not in the Discord server {self.guild_id}: invite it with the "
                    "URL in the README, or fix BOTTOWN_DISCORD_GUILD_ID"
                )
            return guild
        guilds = sorted(self.client.guilds, key=lambda g: g.id)
        if not guilds:
            raise RuntimeError("the bot is in no Discord server yet: invite it (see the README)")
        if len(guilds) > 1:
            log.warning(
                "the bot is in %d servers; the town uses %r (set BOTTOWN_DISCORD_GUILD_ID)",
                len(guilds),
                guilds[0].name,
            )
        return guilds[0]


def _gateway_ended(task: asyncio.Task[None]) -> None:
    """discord.py reconnects by itself; it gives up only on errors a restart cannot fix."""
    if not task.cancelled() and task.exception() is not None:
        log.error("Discord: the gateway connection ended for good", exc_info=task.exception())

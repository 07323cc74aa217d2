"""The town in a Discord server, through discord.py.

Every town location is a text channel in one category named after the town
(``adapters.discord.channels``); residents post there through the channel's webhook under their
own names (``adapters.discord.poster``); members' messages and commands reach the town through
``adapters.discord.inbound``. This module picks the guild and wires the three, on a gateway
connection of its own or on the one the bot's other servers share (``adapters.discord.gateway``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import discord

from adapters.core.links import ChannelLinks
from adapters.core.ports import Outgoing, TownPort
from adapters.discord.channels import LocationChannels
from adapters.discord.departures import Departures
from adapters.discord.errors import NETWORK_ERRORS
from adapters.discord.gateway import DiscordGateway
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
    """One town in one Discord server (guild), on its own gateway connection or on one it
    shares with the bot's other servers' towns (``gateway``: ``guild_id`` names its server)."""

    name = PLATFORM
    max_chars = MAX_CHARS
    min_interval_s = MIN_INTERVAL_S

    def __init__(
        self,
        port: TownPort,
        store: Store,
        town_id: int,
        *,
        token: str = "",
        gateway: DiscordGateway | None = None,
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
        self.guild_id = guild_id
        self._own = gateway is None  # its own connection: it starts and stops it
        self.gateway = gateway or DiscordGateway(
            token,
            message_content=message_content,
            member_departures=member_departures,
            guild_ready_timeout=guild_ready_timeout,
            connect_timeout=connect_timeout,
            clock=clock,
            sleep=sleep,
        )
        self.message_content = self.gateway.message_content
        self.client = self.gateway.client
        self.proxies = ProxyWatch(sleep=sleep)
        self._departures = Departures(port, guild_id)
        links = ChannelLinks(store, town_id, PLATFORM)
        self.channels = LocationChannels(self.client, port, links, webhook_name(port.town_name))
        bucket = ServerBucket(clock=clock, sleep=sleep)  # the server-wide webhook bucket
        self.poster = WebhookPoster(self.channels, port, avatar_url, bucket)
        self.inbound = Inbound(port, self.client, self.channels, links, self.proxies)

    @property
    def departures(self) -> Departures:
        return self._departures

    @property
    def guild(self) -> discord.Guild | None:
        return self.channels.guild

    # -- the server's events, from the gateway (``adapters.discord.gateway.Town``) -----------

    async def on_message(self, message: discord.Message) -> None:
        await self.inbound.on_message(message)

    def deleted(self, message_id: int) -> None:
        self.proxies.deleted(message_id)

    async def confirmed(self, interaction: discord.Interaction[Any], line: str) -> None:
        await self.inbound.confirmed(interaction, line)

    async def on_reaction(self, event: discord.RawReactionActionEvent) -> None:
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
            if self._own:
                await self.gateway.start()
            guild = self._pick_guild()
            self.guild_id = self._departures.guild_id = guild.id
            await self.channels.provision(guild)
            await self.proxies.look(guild)
            await self.inbound.sync_commands(guild)
            self.gateway.towns[guild.id] = self
        except BaseException:
            await self.stop()
            raise
        intent = "on" if self.message_content else "off"
        log.info("Discord: the town lives in %r (message_content intent %s)", self.guild, intent)

    def listen(self) -> None:
        """Hear the server on a shared gateway without provisioning anything: the channels are
        the ones the store links (a gateway process; whoever runs the town made them)."""
        guild = self._pick_guild()
        self.guild_id = self._departures.guild_id = guild.id
        self.channels.known(guild)
        self.inbound.hear_commands(guild)
        self.gateway.towns[guild.id] = self

    async def stop(self) -> None:
        if self.guild_id is not None and self.gateway.towns.get(self.guild_id) == self:
            del self.gateway.towns[self.guild_id]
        await self.poster.close()
        if self._own:
            await self.gateway.stop()

    def status_line(self) -> str:
        guild = self.guild.name if self.guild else "(not connected)"
        intent = "on" if self.message_content else "off (mentions and slash commands only)"
        line = f"Discord: guild {guild}, message_content intent {intent}"
        if self.channels.problems:
            line += "; " + "; ".join(self.channels.problems)
        if self.poster.problem:
            line += f"; posting PAUSED: {self.poster.problem}"
        return line

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

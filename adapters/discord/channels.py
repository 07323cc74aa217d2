"""The town's Discord channels: a category named after the town, a text channel per location,
and a webhook in each for the residents' posts.

Provisioning is idempotent: channels are found by their stored id, then by name in the town's
category, and only then created; the mapping and each channel's webhook live in ``ChannelLink``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import discord

from adapters.core.links import ChannelLinks
from adapters.core.ports import TownPort
from adapters.core.text import channel_about
from town.store.models import ChannelLink

log = logging.getLogger(__name__)


def channel_name(area: str) -> str:
    """A location's text channel name as Discord stores it: "Hobbs Cafe" -> "hobbs-cafe"."""
    name = re.sub(r"[^\w-]", "", re.sub(r"\s+", "-", area.strip().casefold()))
    return name[:100] or "place"


def _slug(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalnum())


class LocationChannels:
    """Each location's channel and webhook in one guild: found or made, remembered, repaired."""

    def __init__(
        self, client: discord.Client, town: TownPort, links: ChannelLinks, hook_name: str
    ) -> None:
        self.client, self.town, self.links = client, town, links
        self.hook_name = hook_name  # what a new webhook is called
        self.guild: discord.Guild | None = None
        self._category: discord.CategoryChannel | None = None
        self._channel_of: dict[str, int] = {}  # area -> channel id
        self._area_of: dict[int, str] = {}  # channel id -> area
        self._hooks: dict[str, discord.Webhook] = {}  # area -> its channel's webhook
        self._repair_locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    def area_of(self, channel_id: int) -> str | None:
        return self._area_of.get(channel_id)

    def channel_id(self, area: str) -> int | None:
        return self._channel_of.get(area)

    def hook(self, area: str) -> discord.Webhook | None:
        return self._hooks.get(area)

    async def provision(self, guild: discord.Guild) -> None:
        """The town's category, a text channel and a webhook per location: found, else made."""
        self.guild = guild
        existing: list[discord.abc.GuildChannel] = list(await guild.fetch_channels())
        links = self.links.load()
        self._category = await self._ensure_category(guild, existing)
        for area in self.town.areas():
            link = links.get(area)
            channel = self._find_channel(existing, area, link)
            if channel is None:
                channel = await self._create_channel(guild, area)
                existing.append(channel)
            extra = dict(link.extra) if link and link.channel_id == str(channel.id) else {}
            hook = self._stored_webhook(extra) or await self._find_or_make_webhook(channel)
            self._remember(area, channel.id, hook)

    async def replace_webhook(self, area: str, stale: discord.Webhook) -> None:
        """The webhook is gone (Unknown Webhook): make a new one, and a new channel too if the
        channel went with it."""
        async with self._repair_locks[area]:
            if self._hooks.get(area) is not stale:
                return  # replaced meanwhile
            assert self.guild is not None
            channel = self.guild.get_channel(self._channel_of[area])
            if isinstance(channel, discord.TextChannel):
                try:
                    hook = await self._find_or_make_webhook(channel)
                except discord.NotFound:  # Unknown Channel
                    channel = None
            if not isinstance(channel, discord.TextChannel):
                log.warning("Discord: the channel of %s is gone; making it again", area)
                channel = await self._create_channel(self.guild, area)
                hook = await self._find_or_make_webhook(channel)
            self._remember(area, channel.id, hook)

    async def _ensure_category(
        self, guild: discord.Guild, existing: Sequence[discord.abc.GuildChannel]
    ) -> discord.CategoryChannel:
        wanted = self.town.town_name.casefold()
        for channel in existing:
            if isinstance(channel, discord.CategoryChannel) and channel.name.casefold() == wanted:
                return channel
        return await guild.create_category(
            self.town.town_name[:100], reason="bottown: the town's category"
        )

    def _find_channel(
        self,
        existing: Sequence[discord.abc.GuildChannel],
        area: str,
        link: ChannelLink | None,
    ) -> discord.TextChannel | None:
        texts = [c for c in existing if isinstance(c, discord.TextChannel)]
        if link is not None:
            for channel in texts:
                if str(channel.id) == link.channel_id:
                    return channel
        category_id = self._category.id if self._category else None
        for channel in texts:
            if channel.category_id == category_id and _slug(channel.name) == _slug(area):
                return channel
        return None

    async def _create_channel(self, guild: discord.Guild, area: str) -> discord.TextChannel:
        if self._category is None or guild.get_channel(self._category.id) is None:
            found = list(await guild.fetch_channels())
            self._category = await self._ensure_category(guild, found)
        return await guild.create_text_channel(
            channel_name(area),
            category=self._category,
            topic=channel_about(self.town.town_name, area)[:1024],
            reason="bottown: one channel per town location",
        )

    def _stored_webhook(self, extra: dict[str, Any]) -> discord.Webhook | None:
        hook_id, token = extra.get("webhook_id"), extra.get("webhook_token")
        if not hook_id or not token:
            return None
        return discord.Webhook.partial(int(hook_id), str(token), client=self.client)

    async def _find_or_make_webhook(self, channel: discord.TextChannel) -> discord.Webhook:
        """The bot's own webhook in ``channel`` if it has one (a store that was reset), else a
        new one."""
        me = self.client.user
        for hook in await channel.webhooks():
            if hook.token and me is not None and hook.user is not None and hook.user.id == me.id:
                return hook
        return await channel.create_webhook(
            name=self.hook_name, reason="bottown: residents post through it"
        )

    def _remember(self, area: str, channel_id: int, hook: discord.Webhook) -> None:
        self._channel_of[area] = channel_id
        self._area_of = {cid: a for a, cid in self._channel_of.items()}
        self._hooks[area] = hook
        extra = {"webhook_id": str(hook.id), "webhook_token": hook.token or ""}
        self.links.save(area, str(channel_id), extra)

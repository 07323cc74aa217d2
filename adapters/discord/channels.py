"""The town's Discord channels: a category named after the town, a text channel per location,
and a webhook in each for the residents' posts.

Provisioning is idempotent: channels are found by their stored id, then by name in the town's
category, and only then created; the mapping and each channel's webhook live in ``ChannelLink``.

It never stops the town: a permission the bot lacks (``adapters.discord.rights``), a channel at
Discord's 15 webhooks, a server at 500 channels, each becomes a line in ``problems`` (for the
log and ``status``) and the town runs on what it has: a channel without a webhook of ours gets
the residents' lines from the bot, a location without a channel is not shown, and a category at
50 channels spills into a second one ("Town 2").
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
from adapters.discord.rights import missing
from town.store.models import ChannelLink

log = logging.getLogger(__name__)

TOO_MANY_WEBHOOKS, TOO_MANY_CHANNELS = 30007, 30013


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
        self._ensured: set[str] = set()  # places given a channel after start-up (``ensure``)
        self.problems: list[str] = []  # what provisioning could not do, and what to grant

    def area_of(self, channel_id: int) -> str | None:
        return self._area_of.get(channel_id)

    def channel_id(self, area: str) -> int | None:
        return self._channel_of.get(area)

    def hook(self, area: str) -> discord.Webhook | None:
        return self._hooks.get(area)

    def text_channel(self, area: str) -> discord.TextChannel | None:
        channel_id = self._channel_of.get(area)
        found = self.guild.get_channel(channel_id) if self.guild and channel_id else None
        return found if isinstance(found, discord.TextChannel) else None

    async def provision(self, guild: discord.Guild) -> None:
        """The town's category, a text channel and a webhook per location: found, else made;
        what cannot be done is noted in ``problems``, never raised."""
        self.guild = guild
        self.problems = [f"the bot lacks {line}" for line in missing(guild.me.guild_permissions)]
        existing: list[discord.abc.GuildChannel] = list(await guild.fetch_channels())
        links = self.links.load()
        perms = guild.me.guild_permissions
        can_make = perms.manage_channels or perms.administrator
        try:
            self._category = await self._ensure_category(guild, existing, create=can_make)
        except discord.HTTPException as exc:
            self._note(f"no category for the town ({exc.text})")
        for area in self.town.areas():
            await self._provision_area(guild, area, existing, links.get(area), can_make)
        for problem in self.problems:
            log.warning("Discord: %s", problem)

    def known(self, guild: discord.Guild) -> None:
        """The channels and webhooks the store links to the town's places, as whoever
        provisioned them left them (a process that only listens makes nothing)."""
        self.guild = guild
        for area, link in self.links.load().items():
            if link.channel_id.isdigit():  # (not the row of the synced commands)
                self._channel_of[area] = int(link.channel_id)
                if hook := self._stored_webhook(link.extra):
                    self._hooks[area] = hook
        self._area_of = {cid: a for a, cid in self._channel_of.items()}

    async def ensure(self, area: str) -> None:
        """A channel and webhook for a place that came after start-up (a live ``bottown town
        update``): found or made now, once; what cannot be done is noted, never raised."""
        guild = self.guild
        if guild is None or area in self._channel_of or area in self._ensured:
            return
        async with self._repair_locks[area]:
            if area in self._channel_of or area in self._ensured:
                return
            self._ensured.add(area)  # tried once a run: a place that cannot have one stays so
            perms = guild.me.guild_permissions
            can_make = perms.manage_channels or perms.administrator
            try:
                existing: list[discord.abc.GuildChannel] = list(await guild.fetch_channels())
                link = self.links.load().get(area)
                await self._provision_area(guild, area, existing, link, can_make)
            except discord.HTTPException as exc:
                self._note(f"{area} has no channel: {_why(exc)}")

    async def _provision_area(
        self,
        guild: discord.Guild,
        area: str,
        existing: list[discord.abc.GuildChannel],
        link: ChannelLink | None,
        can_make: bool,
    ) -> None:
        channel = self._find_channel(existing, area, link)
        if channel is None and not can_make:
            self._note(f"{area} has no channel (the bot may not make one)")
            return
        if channel is None:
            try:
                channel = await self._create_channel(guild, area)
            except discord.HTTPException as exc:
                self._note(f"{area} has no channel: {_why(exc)}")
                return
            existing.append(channel)
        extra = dict(link.extra) if link and link.channel_id == str(channel.id) else {}
        hook = self._stored_webhook(extra) or await self._webhook_if_possible(area, channel)
        self._remember(area, channel.id, hook)

    def _note(self, problem: str) -> None:
        if problem not in self.problems:
            self.problems.append(problem)

    async def _webhook_if_possible(
        self, area: str, channel: discord.TextChannel
    ) -> discord.Webhook | None:
        try:
            return await self._find_or_make_webhook(channel)
        except discord.HTTPException as exc:
            if not isinstance(exc, discord.Forbidden) and exc.code != TOO_MANY_WEBHOOKS:
                raise  # the channel is gone, the token revoked, Discord in trouble: not for good
            self._note(f"{area}: residents post as the bot, names in the text ({_why(exc)})")
            return None

    async def replace_webhook(self, area: str, stale: discord.Webhook) -> None:
        """The webhook is gone (Unknown Webhook): make a new one, and a new channel too if the
        channel went with it."""
        async with self._repair_locks[area]:
            if self._hooks.get(area) is not stale:
                return  # replaced meanwhile
            assert self.guild is not None
            channel = self.guild.get_channel(self._channel_of[area])
            hook: discord.Webhook | None = None
            if isinstance(channel, discord.TextChannel):
                try:
                    hook = await self._webhook_if_possible(area, channel)
                except discord.NotFound:  # Unknown Channel
                    channel = None
            if not isinstance(channel, discord.TextChannel):
                log.warning("Discord: the channel of %s is gone; making it again", area)
                channel = await self._create_channel(self.guild, area)
                hook = await self._webhook_if_possible(area, channel)
            self._remember(area, channel.id, hook)

    async def _ensure_category(
        self,
        guild: discord.Guild,
        existing: Sequence[discord.abc.GuildChannel],
        name: str | None = None,
        *,
        create: bool = True,
    ) -> discord.CategoryChannel | None:
        name = name or self.town.town_name
        for channel in existing:
            if isinstance(channel, discord.CategoryChannel) and channel.name.casefold() == (
                name.casefold()
            ):
                return channel
        if not create:
            return None
        return await guild.create_category(name[:100], reason="bottown: the town's category")

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
        try:
            return await self._create_in(guild, area, self._category)
        except discord.HTTPException as exc:
            if exc.status != 400 or "parent_id" not in exc.text:
                raise
        # the category holds Discord's 50 channels: the town goes on in a second one
        found = list(await guild.fetch_channels())
        self._category = await self._ensure_category(guild, found, f"{self.town.town_name} 2")
        return await self._create_in(guild, area, self._category)

    async def _create_in(
        self, guild: discord.Guild, area: str, category: discord.CategoryChannel | None
    ) -> discord.TextChannel:
        return await guild.create_text_channel(
            channel_name(area),
            category=category,
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

    def _remember(self, area: str, channel_id: int, hook: discord.Webhook | None) -> None:
        self._channel_of[area] = channel_id
        self._area_of = {cid: a for a, cid in self._channel_of.items()}
        if hook is None:
            self._hooks.pop(area, None)
            self.links.save(area, str(channel_id), {})
            return
        self._hooks[area] = hook
        extra = {"webhook_id": str(hook.id), "webhook_token": hook.token or ""}
        self.links.save(area, str(channel_id), extra)


def _why(exc: discord.HTTPException) -> str:
    if exc.code == TOO_MANY_WEBHOOKS:
        return "the channel already has Discord's 15 webhooks: delete one it does not need"
    if exc.code == TOO_MANY_CHANNELS:
        return "the server has Discord's 500 channels: delete some, then restart the town"
    if isinstance(exc, discord.Forbidden):
        return f"missing permission ({exc.text}): see the permissions above"
    return f"Discord answered {exc.status} ({exc.code}): {exc.text}"

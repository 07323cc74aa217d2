"""The gateway connection: discord.py's sharded client (every shard Discord recommends, or the
shards this process holds), whose messages go to the adapter's inbound half."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import discord
from discord import app_commands

from adapters.discord.confirm import ConfirmButton, Confirmed
from adapters.discord.departures import Departing
from adapters.discord.shards import EVERY_SHARD, IdentifyPacer, ShardSet

log = logging.getLogger(__name__)

NO_MENTIONS = discord.AllowedMentions.none()


class TownClient(discord.AutoShardedClient):
    """discord.py's sharded client, mentioning no one by default, with the ``/town`` command
    tree; its IDENTIFYs keep Discord's pace (``pacer``)."""

    def __init__(
        self,
        on_message: Callable[[discord.Message], Awaitable[None]],
        intents: discord.Intents,
        ready: float,
        on_delete: Callable[[int], None] = lambda message_id: None,
        departures: Departing | None = None,
        on_reaction: Callable[[discord.RawReactionActionEvent], Awaitable[None]] | None = None,
        on_guild: Callable[[discord.Guild, bool], Awaitable[None]] | None = None,
        shards: ShardSet = EVERY_SHARD,
        pacer: IdentifyPacer | None = None,
    ) -> None:
        # shard_ids only when this process holds some (discord.py's stubs want a list)
        held: dict[str, Any] = {} if shards.ids is None else {"shard_ids": list(shards.ids)}
        super().__init__(
            intents=intents,
            allowed_mentions=NO_MENTIONS,
            guild_ready_timeout=ready,
            shard_count=shards.count,
            **held,
        )
        self.pacer = pacer or IdentifyPacer()
        self._handle, self._deleted, self._reacted = on_message, on_delete, on_reaction
        self.departures = departures
        self._guild_changed = on_guild  # (guild, joined): the bot invited to or removed from it
        self.confirmed: Confirmed | None = None  # what a confirmation button runs (inbound)
        self.add_dynamic_items(ConfirmButton)
        self.tree: app_commands.CommandTree[TownClient] = app_commands.CommandTree(self)

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        await self.pacer.before(shard_id)

    async def on_message(self, message: discord.Message) -> None:
        try:
            await self._handle(message)
        except Exception:  # one bad message must not disturb the others
            log.exception("a Discord message in #%s could not be handled", message.channel)

    async def on_raw_reaction_add(self, payload: discord.RawReactionActionEvent) -> None:
        await self._reaction(payload)

    async def on_raw_reaction_remove(self, payload: discord.RawReactionActionEvent) -> None:
        await self._reaction(payload)

    async def _reaction(self, payload: discord.RawReactionActionEvent) -> None:
        if self._reacted is None:
            return
        try:
            await self._reacted(payload)
        except Exception:  # one bad reaction must not disturb the others
            log.exception(
                "a Discord reaction on message %s could not be handled", payload.message_id
            )

    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        self._deleted(payload.message_id)

    # the bot invited to a server (GUILD_CREATE of a guild not in READY) or removed from one
    async def on_guild_join(self, guild: discord.Guild) -> None:
        await self._guild_event(guild, True)

    async def on_guild_remove(self, guild: discord.Guild) -> None:
        await self._guild_event(guild, False)

    async def _guild_event(self, guild: discord.Guild, joined: bool) -> None:
        if self._guild_changed is None:
            return
        try:
            await self._guild_changed(guild, joined)
        except Exception:  # one server's town must not stop the gateway
            log.exception("Discord: joining or leaving the server %s failed", guild.id)

    # a member banned, kicked or gone (``adapters.discord.departures``)
    async def on_member_ban(self, guild: discord.Guild, user: discord.abc.User) -> None:
        if self.departures is not None:
            await self.departures.on_member_ban(guild, user)

    async def on_audit_log_entry_create(self, entry: discord.AuditLogEntry) -> None:
        if self.departures is not None:
            await self.departures.on_audit_log_entry_create(entry)

    async def on_raw_member_remove(self, payload: discord.RawMemberRemoveEvent) -> None:
        if self.departures is not None:
            await self.departures.on_raw_member_remove(payload)

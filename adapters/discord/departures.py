"""Members who leave the town's Discord server: banned (GUILD_BAN_ADD), kicked (a kick has no
event of its own: its audit log entry, which needs View Audit Log) or gone of their own accord
(GUILD_MEMBER_REMOVE, the privileged members intent). Each is handed to the town, which forgets
them as ``BOTTOWN_FORGET_ON_LEAVE`` says."""

from __future__ import annotations

import logging
from typing import Protocol

import discord

from adapters.core.ports import TownPort

log = logging.getLogger(__name__)

PLATFORM = "discord"


class Departing(Protocol):
    """What the gateway's client hands a member's departure to (a town's ``Departures``, or
    the gateway, which finds the server's town)."""

    async def on_member_ban(self, guild: discord.Guild, user: discord.abc.User) -> None: ...

    async def on_audit_log_entry_create(self, entry: discord.AuditLogEntry) -> None: ...

    async def on_raw_member_remove(self, payload: discord.RawMemberRemoveEvent) -> None: ...


class Departures:
    def __init__(self, town: TownPort, guild_id: int | None = None) -> None:
        self.town = town
        self.guild_id = guild_id  # the town's server once known; None: any

    def _ours(self, guild_id: int) -> bool:
        return self.guild_id is None or guild_id == self.guild_id

    async def left(self, guild_id: int, user: discord.abc.User, how: str) -> None:
        if not self._ours(guild_id) or user.bot:
            return
        try:
            forgotten = await self.town.member_left(
                PLATFORM, str(user.id), how, getattr(user, "display_name", "")
            )
        except Exception:  # one departure must not stop the gateway
            log.exception("a Discord member's departure (%s) could not be handled", how)
            return
        if forgotten:
            log.info("a Discord member left (%s) and was forgotten", how)

    async def on_member_ban(self, guild: discord.Guild, user: discord.abc.User) -> None:
        await self.left(guild.id, user, "ban")

    async def on_audit_log_entry_create(self, entry: discord.AuditLogEntry) -> None:
        if entry.action is not discord.AuditLogAction.kick:
            return
        target = entry.target
        if isinstance(target, discord.abc.User):
            await self.left(entry.guild.id, target, "kick")
        elif target is not None:  # a member no longer cached: only the id is known
            await self._left_by_id(entry.guild.id, str(target.id), "kick")

    async def _left_by_id(self, guild_id: int, user_id: str, how: str) -> None:
        if self._ours(guild_id):
            await self.town.member_left(PLATFORM, user_id, how)

    async def on_raw_member_remove(self, payload: discord.RawMemberRemoveEvent) -> None:
        await self.left(payload.guild_id, payload.user, "leave")

"""Proxy bots (PluralKit, Tupperbox): a member writes, the proxy deletes the message within a
second or so and posts it again through a webhook under the name of the member's character.

The town hears such words once, under the proxied name, from the webhook's message: when a
proxy bot is in the server (asked once at start), a member's message is heard only after
``wait_s``, and not at all if it was deleted meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import discord

log = logging.getLogger(__name__)

PROXY_APPS = {466378653216014359: "PluralKit", 431544605209788416: "Tupperbox"}
WAIT_S = 2.0  # how long a member's message may still be replaced by a proxy
DELETIONS_KEPT = 500


class ProxyWatch:
    def __init__(
        self, wait_s: float = WAIT_S, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    ) -> None:
        self.wait_s, self.sleep = wait_s, sleep
        self.present: list[str] = []  # the proxy bots in the server
        self._deleted: OrderedDict[int, None] = OrderedDict()

    async def look(self, guild: discord.Guild) -> None:
        """Which proxy bots are members of the server (a REST call each, no members intent)."""
        self.present = []
        for user_id, name in PROXY_APPS.items():
            try:
                await guild.fetch_member(user_id)
            except discord.HTTPException:
                continue
            self.present.append(name)
        if self.present:
            names = ", ".join(self.present)
            log.info("Discord: %s in the server: proxied words are heard as reposted", names)

    @staticmethod
    def proxied(message: discord.Message) -> bool:
        """A proxy bot's repost of a member's words (its webhook, its application)."""
        return message.webhook_id is not None and message.application_id in PROXY_APPS

    def deleted(self, message_id: int) -> None:
        self._deleted[message_id] = None
        while len(self._deleted) > DELETIONS_KEPT:
            self._deleted.popitem(last=False)

    async def replaced(self, message: discord.Message) -> bool:
        """After a proxy's usual delay: whether ``message`` was deleted (the proxy reposts it)."""
        if not self.present:
            return False
        await self.sleep(self.wait_s)
        return message.id in self._deleted

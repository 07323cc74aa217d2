"""A member removed from the Slack workspace (deactivated by an admin): Slack sends
``user_change`` with the user ``deleted``. The town forgets them as ``BOTTOWN_FORGET_ON_LEAVE``
says for a removal ("kick")."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from adapters.core.ports import TownPort

log = logging.getLogger(__name__)

PLATFORM = "slack"
REMOVED = "kick"  # a deactivation is an admin's act, as a Discord kick is


class Departures:
    def __init__(
        self, town: TownPort, hand_off: Callable[[Callable[[], Awaitable[None]]], None]
    ) -> None:
        self.town, self.hand_off = town, hand_off

    async def on_user_change(self, ack: AsyncAck, event: dict[str, Any]) -> None:
        await ack()
        user = event.get("user")
        if not isinstance(user, dict) or not user.get("deleted") or user.get("is_bot"):
            return
        user_id = str(user.get("id") or "")
        profile = user.get("profile")
        profile = profile if isinstance(profile, dict) else {}
        name = str(profile.get("display_name") or user.get("real_name") or "")
        if user_id:
            self.hand_off(lambda: self._removed(user_id, name))

    async def _removed(self, user_id: str, name: str) -> None:
        if await self.town.member_left(PLATFORM, user_id, REMOVED, name):
            log.info("a Slack member was removed from the workspace and forgotten")

"""Workspace members as the town sees them: a display name and whether they are an admin."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.errors import NETWORK_ERRORS

log = logging.getLogger(__name__)

USER_TTL_S = 300.0  # how long a member's name and admin flag are trusted


@dataclass(frozen=True)
class Member:
    name: str
    is_admin: bool


class Members:
    """``users.info``, cached for ``USER_TTL_S``."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client
        self._cache: dict[str, tuple[float, Member]] = {}

    async def get(self, user: str) -> Member:
        """A member's display name and whether they are a workspace admin or owner."""
        cached = self._cache.get(user)
        now = time.monotonic()
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            info = (await self.client.users_info(user=user)).get("user") or {}
        except (SlackApiError, *NETWORK_ERRORS) as exc:
            log.warning("Slack: users.info %s failed: %s", user, exc)
            return Member(user, False)
        profile = info.get("profile") or {}
        name = (
            profile.get("display_name")
            or profile.get("real_name")
            or info.get("real_name")
            or info.get("name")
            or user
        )
        admin = bool(info.get("is_admin") or info.get("is_owner") or info.get("is_primary_owner"))
        member = Member(str(name), admin)
        self._cache[user] = (now + USER_TTL_S, member)
        return member

"""The town's Slack channels: one public channel per location, the stored one while it lives,
else one found by name, else a new one; joined if needed, and remembered in the store."""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.core.links import ChannelLinks
from adapters.core.ports import TownPort
from adapters.core.text import channel_about
from adapters.slack.errors import ProvisionError, error_code
from adapters.slack.text import channel_name, numbered

log = logging.getLogger(__name__)


class LocationChannels:
    """Each location's channel id in one workspace: found or made, remembered, repaired."""

    def __init__(self, client: AsyncWebClient, town: TownPort, links: ChannelLinks) -> None:
        self.client, self.town, self.links = client, town, links
        self._channels: dict[str, str] = {}  # area -> channel id
        self._areas: dict[str, str] = {}  # channel id -> area

    def count(self) -> int:
        return len(self._channels)

    def area_of(self, channel_id: str) -> str | None:
        return self._areas.get(channel_id)

    async def channel_of(self, area: str) -> str:
        """The channel of ``area``, provisioned now if it has none yet."""
        channel = self._channels.get(area)
        if channel is None:
            channel = await self._provision_area(area, await self._list_channels(), None)
        return channel

    async def provision(self) -> None:
        listing = await self._list_channels()
        links = self.links.load()
        for area in self.town.areas():
            link = links.get(area)
            await self._provision_area(area, listing, link.channel_id if link else None)

    async def repair(self, area: str, code: str) -> None:
        """After Slack answered ``code`` for the channel of ``area``: join it again, or find or
        make another."""
        channel = self._channels.get(area)
        if code == "not_in_channel" and channel:
            await self.client.conversations_join(channel=channel)
            return
        if channel:
            self._areas.pop(channel, None)
        await self._provision_area(area, await self._list_channels(), channel)

    async def _provision_area(
        self, area: str, listing: list[dict[str, Any]], linked: str | None
    ) -> str:
        known = next((c for c in listing if c.get("id") == linked), None) if linked else None
        if known is None or known.get("is_archived"):
            known = await self._find_or_create(area, listing)
        if not known.get("is_member"):
            await self.client.conversations_join(channel=known["id"])
            known["is_member"] = True
        channel_id = str(known["id"])
        self.links.save(area, channel_id, {"name": str(known.get("name", ""))})
        self._channels[area] = channel_id
        self._areas[channel_id] = area
        return channel_id

    async def _find_or_create(self, area: str, listing: list[dict[str, Any]]) -> dict[str, Any]:
        base = channel_name(self.town.town_name, area)
        for n in range(1, 50):
            name = numbered(base, n)
            found = next((c for c in listing if c.get("name") == name), None)
            if found is not None:
                if not found.get("is_archived"):
                    return found
                continue  # an archived channel keeps its name; a bot cannot unarchive it
            try:
                created = await self.client.conversations_create(name=name, is_private=False)
            except SlackApiError as exc:
                if error_code(exc) == "name_taken":  # a private channel, say: try the next
                    continue
                raise
            channel = dict(created["channel"])
            channel["is_member"] = True  # the creator is in it
            await self._describe(str(channel["id"]), area)
            listing.append(channel)
            log.info("Slack: created #%s", name)
            return channel
        raise ProvisionError(f"no free Slack channel name like {base!r}")

    async def _describe(self, channel_id: str, area: str) -> None:
        """A new channel's purpose says what it is, and that its residents are AI; a channel
        is usable without it (the app may lack ``channels:manage``)."""
        purpose = channel_about(self.town.town_name, area)[:250]  # Slack's limit
        try:
            await self.client.conversations_setPurpose(channel=channel_id, purpose=purpose)
        except SlackApiError as exc:
            log.warning("Slack: could not set the purpose of %s (%s)", area, error_code(exc))

    async def _list_channels(self) -> list[dict[str, Any]]:
        channels: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = await self.client.conversations_list(
                types="public_channel", exclude_archived=False, limit=200, cursor=cursor
            )
            channels.extend(dict(c) for c in page.get("channels") or [])
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                return channels

"""The town's Slack channels: one public channel per location, the stored one while it lives,
else one found by name, else a new one; joined if needed, and remembered in the store.

Stored channels are checked one by one (``conversations.info``, Slack's tier 3); the whole list
of public channels (``conversations.list``, tier 2: about 20 pages a minute) is read only when a
location has no live channel yet, and a rate limit on it is waited out patiently, page by page.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.core.links import ChannelLinks
from adapters.core.ports import TownPort
from adapters.core.text import channel_about
from adapters.slack.errors import RATE_LIMITS, ProvisionError, error_code, retry_after
from adapters.slack.text import channel_name, numbered

log = logging.getLogger(__name__)

LIST_TRIES = 12  # rate-limited answers waited out for one page of the channel list


class LocationChannels:
    """Each location's channel id in one workspace: found or made, remembered, repaired."""

    def __init__(
        self,
        client: AsyncWebClient,
        town: TownPort,
        links: ChannelLinks,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.client, self.town, self.links, self.sleep = client, town, links, sleep
        # the channel list pages, without the SDK's two quick retries: we wait them out here
        self._lister = AsyncWebClient(token=client.token, base_url=client.base_url)
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
        links = self.links.load()
        listing: list[dict[str, Any]] | None = None
        for area in self.town.areas():
            link = links.get(area)
            stored = await self._stored(link.channel_id) if link else None
            if stored is not None:
                await self._provision_area(area, [stored], stored["id"])
                continue
            if listing is None:
                listing = await self._list_channels()
            await self._provision_area(area, listing, link.channel_id if link else None)

    async def _stored(self, channel_id: str) -> dict[str, Any] | None:
        """The stored channel if it still lives (not archived), else None."""
        try:
            info = await self.client.conversations_info(channel=channel_id)
        except SlackApiError as exc:
            if error_code(exc) in ("channel_not_found", "missing_scope"):
                return None
            raise
        channel = dict(info.get("channel") or {})
        return None if channel.get("is_archived") or not channel.get("id") else channel

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
            page = await self._list_page(cursor)
            channels.extend(dict(c) for c in page.get("channels") or [])
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                return channels

    async def _list_page(self, cursor: str | None) -> Any:
        for _ in range(LIST_TRIES - 1):
            try:
                return await self._lister.conversations_list(
                    types="public_channel", exclude_archived=False, limit=200, cursor=cursor
                )
            except SlackApiError as exc:
                if exc.response.status_code != 429 and error_code(exc) not in RATE_LIMITS:
                    raise
                wait = retry_after(exc)
                log.info("Slack: the channel list is rate-limited; reading on in %.0f s", wait)
                await self.sleep(wait)
        return await self._lister.conversations_list(
            types="public_channel", exclude_archived=False, limit=200, cursor=cursor
        )

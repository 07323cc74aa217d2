"""Everything the town posts to Slack: the outbox's messages and the answers to commands.

A resident's message is one ``chat.postMessage`` under its own name and an emoji face
(``chat:write.customize``), its outbox idempotency key in the message's metadata. Every text is
escaped so nothing generated can ping anyone. Retries belong to the outbox pump: the posting
client has no retry handlers of its own, and Slack's answers become ``DeliveryError`` (see
``adapters.slack.errors``); a vanished channel is provisioned again once.

Never twice: after a failure that may have stored the post (a server error, a lost connection),
the next try of that outbox key first looks for it in the channel's recent messages (their
metadata carries the key; ``conversations.history``, scope ``channels:history``), and posts only
if it is surely absent.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

from slack_bolt.async_app import AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.core.ports import DeliveryError, Outgoing, Reply, TownPort
from adapters.slack.channels import LocationChannels
from adapters.slack.confirm import confirm_blocks
from adapters.slack.errors import as_delivery_errors, error_code, maybe_stored
from adapters.slack.text import NAME_LIMIT, TOWN_ICON, escape, icon_emoji

log = logging.getLogger(__name__)

MAX_CHARS = 3000  # Slack takes 40,000; a chat line this long is already a lot to read
MIN_INTERVAL_S = 1.0  # Slack's guidance: about one message a second per channel
OUTBOX_EVENT = "bottown_outbox"  # metadata event_type of a post carrying an outbox event
# Slack answers that mean the channel itself is gone or was left: provision it again, retry once.
_REPAIRABLE = ("channel_not_found", "is_archived", "not_in_channel")
UNSURE_KEPT = 1000  # outbox keys remembered after a failure that may have stored the post
LOOK_BACK_S = 120.0  # how far before the unsure try its message is looked for


class SlackPoster:
    def __init__(
        self, channels: LocationChannels, town: TownPort, client: AsyncWebClient, *, token: str
    ) -> None:
        self.channels, self.town = channels, town
        self._client = client  # answers go through the client with the SDK's retries
        # Posting the outbox: no hidden retries; a 429 or 5xx goes to the pump, which waits.
        self._outbox = AsyncWebClient(token=token, base_url=client.base_url, retry_handlers=[])
        self.problem = ""  # the credentials problem posting stopped on, for ``status``
        # outbox key -> (channel id, Slack time before the try) after an ambiguous failure
        self._unsure: OrderedDict[str, tuple[str, float]] = OrderedDict()

    async def send(self, message: Outgoing) -> str:
        try:
            with as_delivery_errors():
                ts = await self._posted_before(message.key) or await self._post_once(message)
        except DeliveryError as exc:
            if exc.credentials:
                self.problem = str(exc)
            raise
        self.problem = ""
        return ts

    async def _post_once(self, message: Outgoing) -> str:
        channel = await self.channels.channel_of(message.area)
        started = time.time()
        try:
            return await self._post_or_repair(message)
        except Exception as exc:
            if maybe_stored(exc):
                self._unsure[message.key] = (channel, started - LOOK_BACK_S)
                while len(self._unsure) > UNSURE_KEPT:
                    self._unsure.popitem(last=False)
            raise

    async def _posted_before(self, key: str) -> str:
        """The ts of the message with outbox ``key`` if an earlier, ambiguous try stored it."""
        if key not in self._unsure:
            return ""
        channel, oldest = self._unsure[key]
        cursor: str | None = None
        while True:
            page = await self._outbox.conversations_history(
                channel=channel,
                oldest=f"{oldest:.6f}",
                include_all_metadata=True,
                limit=200,
                cursor=cursor,
            )
            for found in page.get("messages") or []:
                payload = (found.get("metadata") or {}).get("event_payload") or {}
                if payload.get("key") == key:
                    log.info("Slack: %s was posted before all the same; not posting it again", key)
                    del self._unsure[key]
                    return str(found.get("ts", ""))
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                del self._unsure[key]  # surely absent: post it
                return ""

    async def _post_or_repair(self, message: Outgoing) -> str:
        try:
            return await self._post(message)
        except SlackApiError as exc:
            code = error_code(exc)
            if code not in _REPAIRABLE:
                raise
        log.warning(
            "Slack: the channel of %s answered %s; provisioning it again", message.area, code
        )
        await self.channels.repair(message.area, code)
        return await self._post(message)

    async def _post(self, message: Outgoing) -> str:
        response = await self._outbox.chat_postMessage(
            channel=await self.channels.channel_of(message.area),
            text=escape(message.text),
            username=(message.author or self.town.town_name)[:NAME_LIMIT],
            icon_emoji=icon_emoji(message.author, message.emoji),
            link_names=False,
            unfurl_links=False,
            unfurl_media=False,
            # Slack's message metadata: which outbox event this is, for anyone auditing the
            # channel (and the crash test, which counts each event's posts)
            metadata={"event_type": OUTBOX_EVENT, "event_payload": {"key": message.key}},
        )
        return str(response.get("ts", ""))

    async def answer_mention(self, channel: str, user: str, reply: Reply) -> None:
        """The answer to ``@bot <command>``: ephemeral if private, else the town speaking."""
        if reply.private:
            text = escape(reply.text)
            await self._client.chat_postEphemeral(
                channel=channel,
                user=user,
                text=text,
                blocks=confirm_blocks(reply, text),
                link_names=False,
            )
        else:
            await self._client.chat_postMessage(
                channel=channel,
                text=escape(reply.text),
                username=self.town.town_name[:NAME_LIMIT],
                icon_emoji=TOWN_ICON,
                link_names=False,
                unfurl_links=False,
            )

    async def answer_slash(self, respond: AsyncRespond, reply: Reply) -> None:
        text = escape(reply.text)
        await respond(
            text=text,
            blocks=confirm_blocks(reply, text),
            response_type="ephemeral" if reply.private else "in_channel",
            unfurl_links=False,
        )

"""Everything the town posts to Slack: the outbox's messages and the answers to commands.

A resident's message is one ``chat.postMessage`` under its own name and an emoji face
(``chat:write.customize``), its outbox idempotency key in the message's metadata. Every text is
escaped so nothing generated can ping anyone. Retries belong to the outbox pump: the posting
client has no retry handlers of its own, and Slack's answers become ``DeliveryError`` (see
``adapters.slack.errors``); a vanished channel is provisioned again once.
"""

from __future__ import annotations

import logging

from slack_bolt.async_app import AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.core.ports import Outgoing, Reply, TownPort
from adapters.slack.channels import LocationChannels
from adapters.slack.errors import as_delivery_errors, error_code
from adapters.slack.text import NAME_LIMIT, TOWN_ICON, escape, icon_emoji

log = logging.getLogger(__name__)

MAX_CHARS = 3000  # Slack takes 40,000; a chat line this long is already a lot to read
MIN_INTERVAL_S = 1.0  # Slack's guidance: about one message a second per channel
OUTBOX_EVENT = "bottown_outbox"  # metadata event_type of a post carrying an outbox event
# Slack answers that mean the channel itself is gone or was left: provision it again, retry once.
_REPAIRABLE = ("channel_not_found", "is_archived", "not_in_channel")


class SlackPoster:
    def __init__(
        self, channels: LocationChannels, town: TownPort, client: AsyncWebClient, *, token: str
    ) -> None:
        self.channels, self.town = channels, town
        self._client = client  # answers go through the client with the SDK's retries
        # Posting the outbox: no hidden retries; a 429 or 5xx goes to the pump, which waits.
        self._outbox = AsyncWebClient(token=token, base_url=client.base_url, retry_handlers=[])

    async def send(self, message: Outgoing) -> str:
        with as_delivery_errors():
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
            await self._client.chat_postEphemeral(
                channel=channel, user=user, text=escape(reply.text), link_names=False
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
        await respond(
            text=escape(reply.text),
            response_type="ephemeral" if reply.private else "in_channel",
            unfurl_links=False,
        )

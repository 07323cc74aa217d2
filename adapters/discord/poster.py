"""Everything the town posts to Discord: residents' messages through each channel's webhook,
and the text of every answer to a visitor.

Nothing a resident or a visitor writes may ping anyone: the client and every single send carry
``AllowedMentions.none()`` (a webhook does not inherit the client's default), and mention syntax
is broken with a zero-width space as well. A webhook message's name follows Discord's rules;
if Discord refuses one all the same, the message goes out once more under the town's name with
the resident's name in its text: a name never silences a resident.

Never twice: posts go through a session of our own whose 5xx and 429 discord.py does not retry
(``adapters.discord.errors``); after a failure that may have stored the post, its next try first
reads the channel's recent messages (Read Message History) for that webhook's message with the
same text, and posts only if it is surely absent. All posts share one server-wide bucket
(``adapters.discord.pacing``).
"""

from __future__ import annotations

import hashlib
import logging
import re
import zlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import aiohttp
import discord

from adapters.core.ports import DeliveryError, Outgoing, TownPort
from adapters.discord.channels import LocationChannels
from adapters.discord.client import NO_MENTIONS
from adapters.discord.errors import (
    NETWORK_ERRORS,
    WebhookAnswer,
    delivery_error,
    maybe_stored,
    no_hidden_retries,
)
from adapters.discord.pacing import ServerBucket
from town.text import in_parts

log = logging.getLogger(__name__)

MAX_CHARS = 2000
# Discord lets a webhook post about 30 messages a minute in one channel: stay below it (24).
MIN_INTERVAL_S = 2.5
DEFAULT_AVATAR = "https://cdn.discordapp.com/embed/avatars/{n}.png"  # Discord's own six
ZWSP = "\u200b"
WEBHOOK_NAME = 80  # characters Discord allows in a webhook message's username

_FORBIDDEN_IN_NAME = re.compile(r"discord|clyde", re.IGNORECASE)
_RESERVED_NAMES = ("everyone", "here")  # refused as a whole name, in any case
UNSURE_KEPT = 1000  # outbox keys remembered after a failure that may have stored the post
LOOK_BACK = timedelta(minutes=2)  # how far before the unsure try its message is looked for
_MASS_MENTION = re.compile(r"@(everyone|here)", re.IGNORECASE)
_TAG_MENTION = re.compile(r"<(@[!&]?|#)(\d+)>")  # <@user>, <@!user>, <@&role>, <#channel>


def webhook_name(name: str, fallback: str = "Town") -> str:
    """A name Discord accepts on a webhook message: 1-80 characters without "discord" or
    "clyde" in any case (they become "Disc-ord", "Cl-yde"), nor "@", "#", ":" or "```", and
    not "everyone" or "here" (they become "everyone (resident)")."""
    text = name.replace("```", " ").translate(str.maketrans("@#:", "   "))
    text = " ".join(text.split())
    text = _FORBIDDEN_IN_NAME.sub(_break_word, text)[:WEBHOOK_NAME].strip()
    if text.casefold() in _RESERVED_NAMES:
        text = f"{text} (resident)"
    if text:
        return text
    return webhook_name(fallback) if fallback else "Town"


def _break_word(match: re.Match[str]) -> str:
    word = match.group(0)
    cut = 4 if len(word) == 7 else 2  # "disc-ord", "cl-yde"
    return f"{word[:cut]}-{word[cut:]}"


def escape_mentions(text: str, *, compact: bool = False) -> str:
    """``text`` with every mention made inert: @everyone, @here, users, roles, channels. A
    zero-width space goes after the "@" (or "#"); with ``compact`` the text keeps its length
    instead, the "@" or "#" becoming its fullwidth twin (＠, ＃)."""
    if compact:
        text = _MASS_MENTION.sub(lambda m: f"＠{m.group(1)}", text)
        return _TAG_MENTION.sub(
            lambda m: f"<{m.group(1).replace('@', '＠').replace('#', '＃')}{m.group(2)}>", text
        )
    text = _MASS_MENTION.sub(lambda m: f"@{ZWSP}{m.group(1)}", text)
    return _TAG_MENTION.sub(lambda m: f"<{m.group(1)}{ZWSP}{m.group(2)}>", text)


def answer_parts(text: str) -> list[str]:
    """An answer to a visitor, mentions escaped, in messages Discord takes."""
    return in_parts(escape_mentions(text), MAX_CHARS) or ["Done."]


async def send_answer(
    send: Callable[..., Awaitable[object]],
    text: str,
    *,
    first: Mapping[str, Any] | None = None,
    last: Mapping[str, Any] | None = None,
    **every: Any,
) -> None:
    """An answer to a command, in the parts Discord takes (``answer_parts``), each sent by
    ``send`` (a channel's, a member's or an interaction's) with no mention allowed and
    ``every``; the first part also with ``first`` (a reference to the command), the last with
    ``last`` (a confirmation button)."""
    parts = answer_parts(text)
    for n, part in enumerate(parts):
        extra = dict(every)
        if n == 0:
            extra.update(first or {})
        if n == len(parts) - 1:
            extra.update(last or {})
        await send(part, allowed_mentions=NO_MENTIONS, **extra)


@dataclass(frozen=True)
class _Unsure:
    """A post that may have been stored: where and what to look for."""

    channel_id: int
    hook_id: int
    content: str
    since: datetime


class WebhookPoster:
    """The outbox's messages, each through its location channel's webhook."""

    def __init__(
        self,
        channels: LocationChannels,
        town: TownPort,
        avatar_url: str | None,
        bucket: ServerBucket | None = None,
    ) -> None:
        self.channels, self.town = channels, town
        self.avatar_url = avatar_url  # a template: {n} is 0-5 from the name, {name} the name
        self.bucket = bucket or ServerBucket()
        self.problem = ""  # the credentials problem posting stopped on, for ``status``
        self._session: aiohttp.ClientSession | None = None
        self._unsure: OrderedDict[str, _Unsure] = OrderedDict()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(self, message: Outgoing) -> str:
        """Post one message through its channel's webhook; returns Discord's message id."""
        try:
            message_id = await self._send(message)
        except DeliveryError as exc:
            if exc.credentials:
                self.problem = str(exc)
            raise
        self.problem = ""
        return message_id

    async def _send(self, message: Outgoing) -> str:
        hook = self.channels.hook(message.area)
        channel = self.channels.text_channel(message.area)
        if hook is None and channel is None:
            raise DeliveryError(f"no Discord channel for {message.area!r}", permanent=True)
        try:
            if hook is None:
                assert channel is not None
                return await self._post_as_bot(message, channel)
            if found := await self._posted_before(message.key):
                return found
            try:
                return await self._execute(message, hook)
            except discord.NotFound as exc:  # 10015 Unknown Webhook: deleted by someone
                log.warning("Discord: the webhook of %s is gone (%s)", message.area, exc.code)
                await self.channels.replace_webhook(message.area, hook)
                fresh = self.channels.hook(message.area)
                assert fresh is not None
                return await self._execute(message, fresh)
        except WebhookAnswer as exc:
            if exc.status == 429:
                error = delivery_error(exc)
                self.bucket.hold(error.retry_after or 1.0)
                raise error from exc
            raise delivery_error(exc) from exc
        except discord.HTTPException as exc:
            raise delivery_error(exc) from exc
        except NETWORK_ERRORS as exc:
            raise DeliveryError(f"Discord unreachable: {exc!r}") from exc

    async def _execute(self, message: Outgoing, hook: discord.Webhook) -> str:
        author = message.author or self.town.town_name
        content = escape_mentions(message.text)
        if len(content) > MAX_CHARS:  # the zero-width spaces pushed it over the limit
            content = escape_mentions(message.text, compact=True)
        try:
            return await self._post(message, hook, webhook_name(author), content)
        except discord.HTTPException as exc:
            if exc.status != 400 or "username" not in exc.text:
                raise
        log.warning("Discord refused the name %r: posted as the town, name in text", author)
        named = escape_mentions(f"**{discord.utils.escape_markdown(author)}:** {message.text}")
        if len(named) > MAX_CHARS:
            named = content  # no room for the name: the text, as the town
        return await self._post(message, hook, webhook_name(self.town.town_name), named)

    async def _post(self, message: Outgoing, hook: discord.Webhook, name: str, content: str) -> str:
        await self.bucket.turn(urgent=message.reply)
        own = discord.Webhook.partial(hook.id, hook.token or "", session=self._own_session())
        started = datetime.now(UTC)
        try:
            sent = await own.send(
                content,
                username=name,
                avatar_url=self._avatar(message.author or self.town.town_name),
                allowed_mentions=NO_MENTIONS,
                wait=True,
            )
        except Exception as exc:
            if maybe_stored(exc):
                where = self.channels.channel_id(message.area) or 0
                self._remember_unsure(message.key, _Unsure(where, hook.id, content, started))
            raise
        return str(sent.id)

    async def _post_as_bot(self, message: Outgoing, channel: discord.TextChannel) -> str:
        """Without a webhook of ours in the channel: the bot posts, the name in the text. The
        outbox key's nonce makes Discord answer a repeat with the message it already has."""
        text = message.text
        if message.author:
            text = f"**{discord.utils.escape_markdown(message.author)}:** {text}"
        content = escape_mentions(text)
        if len(content) > MAX_CHARS:
            content = escape_mentions(text, compact=True)[:MAX_CHARS]
        nonce = hashlib.sha256(message.key.encode()).hexdigest()[:25]
        sent = await channel.send(content, nonce=nonce, allowed_mentions=NO_MENTIONS)
        return str(sent.id)

    def _remember_unsure(self, key: str, unsure: _Unsure) -> None:
        if key not in self._unsure:  # keep the first try's time: it is the earliest
            self._unsure[key] = unsure
        while len(self._unsure) > UNSURE_KEPT:
            self._unsure.popitem(last=False)

    async def _posted_before(self, key: str) -> str:
        """The id of the message with outbox ``key`` if an earlier, ambiguous try stored it."""
        unsure = self._unsure.get(key)
        if unsure is None:
            return ""
        guild = self.channels.guild
        channel = guild.get_channel(unsure.channel_id) if guild else None
        if isinstance(channel, discord.TextChannel):
            after = discord.Object(discord.utils.time_snowflake(unsure.since - LOOK_BACK))
            async for found in channel.history(limit=100, after=after):
                if found.webhook_id == unsure.hook_id and found.content == unsure.content:
                    log.info("Discord: %s was posted before all the same; not again", key)
                    del self._unsure[key]
                    return str(found.id)
        del self._unsure[key]  # surely absent (or its channel is gone): post it
        return ""

    def _own_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(middlewares=(no_hidden_retries,))
        return self._session

    def _avatar(self, author: str) -> str | None:
        if not self.avatar_url:
            return None
        n = zlib.crc32(author.encode()) % 6
        return self.avatar_url.format(n=n, name=quote(author))

"""Everything the town posts to Discord: residents' messages through each channel's webhook,
and the text of every answer to a visitor.

Nothing a resident or a visitor writes may ping anyone: the client and every single send carry
``AllowedMentions.none()`` (a webhook does not inherit the client's default), and mention syntax
is broken with a zero-width space as well. A webhook message's name follows Discord's rules.
"""

from __future__ import annotations

import contextlib
import logging
import re
import zlib
from typing import Any
from urllib.parse import quote

import aiohttp
import discord

from adapters.core.ports import DeliveryError, Outgoing, TownPort
from adapters.core.text import split_text
from adapters.discord.channels import LocationChannels
from adapters.discord.client import NO_MENTIONS

log = logging.getLogger(__name__)

MAX_CHARS = 2000
# Discord lets a webhook post about 30 messages a minute in one channel: stay below it.
MIN_INTERVAL_S = 2.0
DEFAULT_AVATAR = "https://cdn.discordapp.com/embed/avatars/{n}.png"  # Discord's own six
ZWSP = "\u200b"

_FORBIDDEN_IN_NAME = re.compile(r"discord|clyde", re.IGNORECASE)
_MASS_MENTION = re.compile(r"@(everyone|here)", re.IGNORECASE)
_TAG_MENTION = re.compile(r"<(@[!&]?|#)(\d+)>")  # <@user>, <@!user>, <@&role>, <#channel>


def webhook_name(name: str, fallback: str = "Town") -> str:
    """A name Discord accepts on a webhook message: 1-80 characters without "discord" or
    "clyde" in any case (they become "Disc-ord", "Cl-yde"), nor "@", "#", ":" or "```"."""
    text = name.replace("```", " ").translate(str.maketrans("@#:", "   "))
    text = " ".join(text.split())
    text = _FORBIDDEN_IN_NAME.sub(_break_word, text)[:80].strip()
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
    return split_text(escape_mentions(text), MAX_CHARS) or ["Done."]


class WebhookPoster:
    """The outbox's messages, each through its location channel's webhook."""

    def __init__(self, channels: LocationChannels, town: TownPort, avatar_url: str | None) -> None:
        self.channels, self.town = channels, town
        self.avatar_url = avatar_url  # a template: {n} is 0-5 from the name, {name} the name

    async def send(self, message: Outgoing) -> str:
        """Post one message through its channel's webhook; returns Discord's message id."""
        hook = self.channels.hook(message.area)
        if hook is None:
            raise DeliveryError(f"no Discord channel for {message.area!r}", permanent=True)
        author = message.author or self.town.town_name
        try:
            try:
                return await self._execute(hook, author, message.text)
            except discord.NotFound as exc:  # 10015 Unknown Webhook: deleted by someone
                log.warning("Discord: the webhook of %s is gone (%s)", message.area, exc.code)
                await self.channels.replace_webhook(message.area, hook)
                fresh = self.channels.hook(message.area)
                assert fresh is not None
                return await self._execute(fresh, author, message.text)
        except discord.HTTPException as exc:
            raise delivery_error(exc) from exc
        except discord.RateLimited as exc:
            raise DeliveryError(str(exc), retry_after=exc.retry_after) from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise DeliveryError(f"Discord unreachable: {exc!r}") from exc

    async def _execute(self, hook: discord.Webhook, author: str, text: str) -> str:
        content = escape_mentions(text)
        if len(content) > MAX_CHARS:  # the zero-width spaces pushed it over the limit
            content = escape_mentions(text, compact=True)
        sent = await hook.send(
            content,
            username=webhook_name(author, self.town.town_name),
            avatar_url=self._avatar(author),
            allowed_mentions=NO_MENTIONS,
            wait=True,
        )
        return str(sent.id)

    def _avatar(self, author: str) -> str | None:
        if not self.avatar_url:
            return None
        n = zlib.crc32(author.encode()) % 6
        return self.avatar_url.format(n=n, name=quote(author))


def delivery_error(exc: discord.HTTPException) -> DeliveryError:
    what = f"Discord answered {exc.status} (code {exc.code}): {exc.text}"
    if exc.status == 429:
        return DeliveryError(what, retry_after=_retry_after(exc.response.headers))
    if exc.status >= 500:
        return DeliveryError(what)
    return DeliveryError(what, permanent=True)  # 403, 400, 404 after a new webhook, ...


def _retry_after(headers: Any) -> float:
    for key in ("X-RateLimit-Reset-After", "Retry-After"):
        value = headers.get(key)
        if value:
            with contextlib.suppress(ValueError):
                return max(0.0, float(value))
    return 1.0

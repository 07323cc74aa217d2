"""Discord's answers as the town's errors, and webhook posts that discord.py does not retry.

discord.py retries a webhook post itself after a 5xx (up to five times) and after a 429 from
Discord's edge; a 5xx can come after the message was stored, so those retries could double it,
and they would stack with the outbox pump's. The poster's HTTP session therefore turns a 429 or
a 5xx into ``WebhookAnswer`` before discord.py sees it (an aiohttp client middleware), and the
pump alone retries, after the poster has looked for the message.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping

import aiohttp
import discord

from adapters.core.ports import DeliveryError

NETWORK_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)
MISSING_ACCESS, MISSING_PERMISSIONS = 50001, 50013


class WebhookAnswer(Exception):
    """A 429 or 5xx to a webhook post, stopped before discord.py retries it."""

    def __init__(self, status: int, headers: Mapping[str, str], text: str) -> None:
        super().__init__(f"Discord answered {status}: {text[:200]}")
        self.status, self.headers, self.text = status, dict(headers), text


async def no_hidden_retries(
    request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
) -> aiohttp.ClientResponse:
    response = await handler(request)
    if response.status == 429 or response.status >= 500:
        text = await response.text()
        response.release()
        raise WebhookAnswer(response.status, response.headers, text)
    return response


def maybe_stored(exc: BaseException) -> bool:
    """A failure after which the post may be in the channel all the same."""
    if isinstance(exc, WebhookAnswer):
        return exc.status >= 500
    if isinstance(exc, discord.DiscordServerError):
        return True
    return isinstance(exc, NETWORK_ERRORS)


def delivery_error(exc: discord.HTTPException | WebhookAnswer) -> DeliveryError:
    if isinstance(exc, WebhookAnswer):
        if exc.status == 429:
            return DeliveryError(str(exc), retry_after=retry_after(exc.headers, exc.text))
        return DeliveryError(str(exc))
    what = f"Discord answered {exc.status} (code {exc.code}): {exc.text}"
    if exc.status == 429:
        return DeliveryError(what, retry_after=retry_after(exc.response.headers, ""))
    if exc.status >= 500:
        return DeliveryError(what)
    if exc.status == 401:
        return DeliveryError(
            "Discord rejects the bot token (reset or revoked): set BOTTOWN_DISCORD_TOKEN to the "
            "token on the Bot page of the Developer Portal",
            credentials=True,
        )
    if exc.status == 403 and exc.code in (MISSING_ACCESS, MISSING_PERMISSIONS):
        return DeliveryError(
            f"the bot lost a permission it needs ({exc.text}): give its role View Channels, "
            "Send Messages, Read Message History and Manage Webhooks in the town's category",
            credentials=True,
        )
    return DeliveryError(what, permanent=True)  # 400, 404 after a new webhook, ...


def retry_after(headers: Mapping[str, str], body: str) -> float:
    for key in ("X-RateLimit-Reset-After", "Retry-After"):
        value = headers.get(key)
        if value:
            with contextlib.suppress(ValueError):
                return max(0.0, float(value))
    with contextlib.suppress(ValueError, TypeError, KeyError):
        return max(0.0, float(json.loads(body)["retry_after"]))
    return 1.0

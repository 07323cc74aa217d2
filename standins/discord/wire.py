"""Discord's wire format for the fake Discord: constants, answers and payload helpers."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

API = "/api/v10"
DISCORD_EPOCH_MS = 1420070400000
INTENT_GUILDS = 1 << 0
INTENT_GUILD_MEMBERS = 1 << 1  # privileged: GUILD_MEMBER_REMOVE among others
INTENT_GUILD_MODERATION = 1 << 2  # GUILD_BAN_ADD, GUILD_AUDIT_LOG_ENTRY_CREATE
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_GUILD_MESSAGE_REACTIONS = 1 << 10
INTENT_MESSAGE_CONTENT = 1 << 15
MANAGE_GUILD = 1 << 5
VIEW_AUDIT_LOG = 1 << 7  # needed for GUILD_AUDIT_LOG_ENTRY_CREATE (a kick's only trace)
AUDIT_MEMBER_KICK, AUDIT_MEMBER_BAN_ADD = 20, 22
MEMBER_PERMISSIONS = (1 << 10) | (1 << 11) | (1 << 16) | (1 << 31)  # view, send, history, slash
EPHEMERAL = 1 << 6
LOADING = 1 << 7
MANAGE_CHANNELS = 1 << 4
ADD_REACTIONS = 1 << 6
VIEW_CHANNEL = 1 << 10
SEND_MESSAGES = 1 << 11
READ_HISTORY = 1 << 16
MANAGE_WEBHOOKS = 1 << 29
# what the README's invite link grants the bot
BOT_PERMISSIONS = (
    MANAGE_CHANNELS | ADD_REACTIONS | VIEW_CHANNEL | SEND_MESSAGES | READ_HISTORY | MANAGE_WEBHOOKS
)
WEBHOOKS_PER_CHANNEL = 15
CHANNELS_PER_CATEGORY = 50
CHANNELS_PER_GUILD = 500
CHANNEL_WEBHOOK_LIMIT = (30, 60.0)  # posts, seconds: one channel's webhooks
SHARED_WEBHOOK_LIMIT = (5, 2.0)  # posts, seconds: all webhooks of the server together

Json = dict[str, Any]


@dataclass
class Call:
    method: str
    path: str  # without the /api/v10 prefix
    query: dict[str, str]
    body: Any


@dataclass
class Fault:
    status: int
    body: Json
    headers: dict[str, str] = field(default_factory=dict)
    stored: bool = False  # the call takes effect, then this is answered
    drop: bool = False  # the connection closes instead of an answer


@dataclass
class InteractionRecord:
    payload: Json
    callbacks: list[Json] = field(default_factory=list)  # the callback bodies we received
    original: Json | None = None  # the deferred / first response message
    original_deleted: bool = False
    original_edited: bool = False
    followups: list[Json] = field(default_factory=list)  # messages created by follow-ups
    created: float = 0.0  # on the fake's clock: 3 s to answer, 15 minutes for follow-ups


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    # exactly "application/json": discord.py parses nothing else (no "; charset=...")
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={**(headers or {}), "Content-Type": "application/json"},
    )


def error(status: int, code: int, message: str) -> web.Response:
    return json_response({"message": message, "code": code}, status)


def refused_name(name: str, extra: set[str]) -> bool:
    """Discord's rules for a webhook's name (and the names a test adds)."""
    lowered = name.casefold()
    return bool(re.search("discord|clyde", lowered)) or lowered in ("everyone", "here", *extra)


def invalid(field_name: str, code: str, message: str) -> web.Response:
    """400 Invalid Form Body with the field's error, as Discord answers it."""
    errors = {field_name: {"_errors": [{"code": code, "message": message}]}}
    return json_response({"code": 50035, "errors": errors, "message": "Invalid Form Body"}, 400)


def answer(request: web.Request, fault: Fault) -> web.Response:
    if fault.drop:
        assert request.transport is not None
        request.transport.close()  # no answer: the client sees the connection end
    return json_response(fault.body, fault.status, fault.headers)


def pinged(content: str, allowed: Json | None) -> list[str]:
    """Whom Discord would notify for ``content`` under these ``allowed_mentions``."""
    parse = ["everyone", "users", "roles"] if allowed is None else allowed.get("parse", [])
    users = [] if allowed is None else allowed.get("users", [])
    roles = [] if allowed is None else allowed.get("roles", [])
    found: list[str] = []
    if "everyone" in parse:
        found += [f"@{m}" for m in re.findall(r"@(everyone|here)\b", content)]
    for user in re.findall(r"<@!?(\d{17,20})>", content):
        if "users" in parse or user in users:
            found.append(f"user:{user}")
    for role in re.findall(r"<@&(\d{17,20})>", content):
        if "roles" in parse or role in roles:
            found.append(f"role:{role}")
    return found


async def body_of(request: web.Request) -> Any:
    raw = await request.read()  # aiohttp keeps the body: the middleware read it already
    return json.loads(raw) if raw else {}


def components_problem(body: Json) -> str | None:
    """What Discord would refuse in a message's ``components`` (action rows of buttons)."""
    rows = body.get("components") or []
    if not isinstance(rows, list) or len(rows) > 5:
        return "components: at most 5 action rows"
    for row in rows:
        items = row.get("components") if isinstance(row, dict) else None
        if row.get("type") != 1 or not isinstance(items, list) or not 1 <= len(items) <= 5:
            return "components: each row is an action row (type 1) of 1 to 5 components"
        for item in items:
            if item.get("type") != 2 or item.get("style") not in (1, 2, 3, 4):
                return "components: only buttons (type 2, style 1-4) here"
            custom_id = item.get("custom_id")
            if not isinstance(custom_id, str) or not 1 <= len(custom_id) <= 100:
                return "components: a button's custom_id is 1 to 100 characters"
            if len(str(item.get("label") or "")) > 80:
                return "components: a button's label is at most 80 characters"
    return None


def now() -> str:
    return datetime.now(UTC).isoformat()

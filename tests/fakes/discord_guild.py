"""The fake Discord's guild: its state, its payloads as Discord sends them, and the gateway
(HELLO, IDENTIFY -> READY + GUILD_CREATE, heartbeats, RESUME) that carries its events."""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import time
from collections import defaultdict
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.discord_wire import (
    API,
    BOT_PERMISSIONS,
    DISCORD_EPOCH_MS,
    INTENT_MESSAGE_CONTENT,
    MANAGE_GUILD,
    MEMBER_PERMISSIONS,
    Call,
    Fault,
    InteractionRecord,
    Json,
    now,
    pinged,
)
from tests.fakes.platform import Clock


class Guild:
    """One guild, one bot: the state every route reads and changes."""

    def __init__(self, guild_name: str = "Test Server") -> None:
        self._counter = itertools.count(1)
        self.app_id = self.snowflake()
        self.token_seen: list[str] = []
        self.bot_user: Json = {
            "id": str(self.app_id),
            "username": "Bottown",
            "discriminator": "0",
            "global_name": None,
            "avatar": None,
            "bot": True,
            "flags": 0,
        }
        self.owner_id = self.snowflake()
        self.guild_id = self.snowflake()
        self.guild_name = guild_name
        self.admin_role_id = self.snowflake()
        self.roles: list[Json] = [
            self._role(self.guild_id, "@everyone", MEMBER_PERMISSIONS, 0),
            self._role(self.admin_role_id, "Mayor", MEMBER_PERMISSIONS | MANAGE_GUILD, 1),
        ]
        self.users: dict[str, Json] = {}
        self.members: dict[str, Json] = {}
        self.channels: dict[str, Json] = {}
        self.webhooks: dict[str, Json] = {}
        self.messages: list[Json] = []  # every message created in the guild's channels
        self.direct: list[Json] = []  # every direct message the bot sent
        self.dms: dict[str, str] = {}  # DM channel id -> the member's user id
        self.closed_dms: set[str] = set()  # user ids who take no direct messages (403 50007)
        self.reactions: list[tuple[str, str, str]] = []  # (channel id, message id, emoji)
        self.typing: list[str] = []  # channel ids the bot showed typing in
        self.commands: list[Json] = []
        self.calls: list[Call] = []
        self.faults: dict[str, list[Fault]] = defaultdict(list)
        self.interactions: dict[str, InteractionRecord] = {}
        self.identifies: list[Json] = []
        self.sockets: list[web.WebSocketResponse] = []
        self.connected = asyncio.Event()
        self.intents = 0
        self.bot_permissions = BOT_PERMISSIONS
        self.bot_role_id = self.snowflake()
        self.token_valid = True
        self.refused_names: set[str] = set()  # names Discord refuses beyond its known rules
        self.clock = Clock()  # the time webhook rate limits are judged on
        self.webhook_posts: list[tuple[float, str]] = []  # (time, channel id) of each post
        self.throttled = 0  # 429s answered by the rate limits
        self._seq = 0
        self._runner: web.AppRunner | None = None
        self.url = ""

    @property
    def api_base(self) -> str:
        return self.url + API

    @property
    def gateway_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/gateway"

    def snowflake(self) -> int:
        """A real-looking snowflake (17-20 digits, time in the high bits)."""
        return ((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22) | next(self._counter)

    async def dispatch(self, event: str, data: Json) -> None:
        """Send a gateway event to every connected client."""
        self._seq += 1
        frame = {"op": 0, "t": event, "s": self._seq, "d": data}
        for ws in list(self.sockets):
            if not ws.closed:
                await ws.send_str(json.dumps(frame))

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.sockets.append(ws)
        await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 41250}}))
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                frame = json.loads(msg.data)
                op = frame.get("op")
                if op == 1:
                    await ws.send_str(json.dumps({"op": 11}))
                elif op == 2:
                    await self._identify(frame["d"])
                elif op == 6:
                    await self.dispatch("RESUMED", {})
        finally:
            self.sockets.remove(ws)
        return ws

    async def _identify(self, data: Json) -> None:
        self.identifies.append(data)
        self.intents = int(data.get("intents", 0))
        ready = {
            "v": 10,
            "user": self.bot_user,
            "guilds": [{"id": str(self.guild_id), "unavailable": True}],
            "session_id": secrets.token_hex(8),
            "resume_gateway_url": self.gateway_url,
            "shard": [0, 1],
            "application": {"id": str(self.app_id), "flags": 0},
            "private_channels": [],
            "relationships": [],
        }
        await self.dispatch("READY", ready)
        await self.dispatch("GUILD_CREATE", self._guild())
        self.connected.set()

    @staticmethod
    def _role(role_id: int, name: str, permissions: int, position: int) -> Json:
        return {
            "id": str(role_id),
            "name": name,
            "color": 0,
            "hoist": False,
            "position": position,
            "permissions": str(permissions),
            "managed": False,
            "mentionable": False,
            "flags": 0,
        }

    def _permissions(self, member: Json) -> int:
        value = MEMBER_PERMISSIONS
        for role in self.roles:
            if role["id"] in member["roles"]:
                value |= int(role["permissions"])
        return value

    def _guild(self) -> Json:
        return {
            "id": str(self.guild_id),
            "name": self.guild_name,
            "icon": None,
            "owner_id": str(self.owner_id),
            "roles": [
                *self.roles,
                {
                    **self._role(self.bot_role_id, "Bottown", self.bot_permissions, 2),
                    "managed": True,
                },
            ],
            "emojis": [],
            "stickers": [],
            "features": [],
            "channels": list(self.channels.values()),
            "threads": [],
            "members": [
                {
                    "user": self.bot_user,
                    "roles": [str(self.bot_role_id)],
                    "joined_at": now(),
                    "deaf": False,
                    "mute": False,
                    "flags": 0,
                }
            ],
            "member_count": 1 + len(self.members),
            "large": False,
            "unavailable": False,
            "joined_at": now(),
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "premium_tier": 0,
            "system_channel_flags": 0,
            "preferred_locale": "en-US",
            "nsfw_level": 0,
            "afk_timeout": 300,
        }

    def _channel(self, name: str, type_: int, parent: Any, topic: Any) -> Json:
        channel_id = str(self.snowflake())
        channel = {
            "id": channel_id,
            "type": type_,
            "guild_id": str(self.guild_id),
            "name": name,
            "position": len(self.channels),
            "permission_overwrites": [],
            "parent_id": str(parent) if parent else None,
            "nsfw": False,
            "flags": 0,
        }
        if type_ == 0:
            channel.update(topic=topic, last_message_id=None, rate_limit_per_user=0)
        self.channels[channel_id] = channel
        return channel

    def _message(
        self,
        channel_id: str,
        content: str,
        author: Json,
        *,
        body: Json | None = None,
        member: Json | None = None,
        mentions: list[Json] | None = None,
        webhook_id: str | None = None,
    ) -> Json:
        message: Json = {
            "id": str(self.snowflake()),
            "channel_id": channel_id,
            "guild_id": str(self.guild_id),
            "author": author,
            "content": content,
            "timestamp": now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": mentions or [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
            "components": [],
        }
        if member is not None:
            message["member"] = member
        if webhook_id is not None:
            message["webhook_id"] = webhook_id
        if body is not None:
            message["body"] = body  # what we were sent, for the tests (not a Discord field)
            message["pinged"] = pinged(content, body.get("allowed_mentions"))
        return message

    def _as_received(self, message: Json) -> Json:
        """The event the bot gets: without the message_content intent, Discord blanks the
        content of messages that neither mention the bot nor come from it."""
        data = {k: v for k, v in message.items() if k not in ("body", "pinged")}
        mentioned = any(u["id"] == str(self.app_id) for u in data["mentions"])
        own = data["author"]["id"] == str(self.app_id)
        if not self.intents & INTENT_MESSAGE_CONTENT and not (mentioned or own):
            data["content"] = ""
        return data

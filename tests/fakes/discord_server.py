"""A local stand-in for Discord: the REST API and the gateway that discord.py talks to.

An aiohttp server on 127.0.0.1 with one guild. It serves the routes the adapter uses (login,
application info, guild channels, webhooks and their execution, channel messages, direct
messages, reactions, application commands, interaction callbacks and follow-ups) and a gateway
websocket (HELLO, IDENTIFY -> READY + GUILD_CREATE, heartbeats, RESUME). Tests push
MESSAGE_CREATE and INTERACTION_CREATE events through it, queue faults (a 429, an Unknown
Webhook) for the next call of a route, close a member's direct messages, and read back every
call it received.

Like Discord it lower-cases text channel names, echoes every posted message to the gateway,
blanks the content of messages that do not mention the bot when the message_content intent is
off, and works out who a message would have pinged from its ``allowed_mentions`` (a webhook
without ``allowed_mentions`` may ping everyone, as on Discord).

Like Discord it is strict about limits and rights: the bot's permissions (``bot_permissions``,
its managed role) gate creating channels (Manage Channels), webhooks (Manage Webhooks), reading
history (View Channel, Read Message History), sending and reacting (403, code 50013); a channel
holds at most 15 webhooks (30007), a category 50 channels (50035), a server 500 (30013); webhook
posts are limited per channel (30 a minute) and in one bucket shared by the whole server (5 in
2 s), answered with 429, ``Retry-After`` and ``retry_after`` as Discord does, judged on
``clock`` (a ``Clock`` the tests move); webhook names "everyone", "here", or with "discord" or
"clyde" get 400. A revoked token (``token_valid = False``) gets 401 on every bot call; webhooks,
which carry their own token, still work. A fault can be answered after the call took effect
(``stored``: the message is in the channel, then a 5xx or a dropped connection).

Point discord.py at it with ``discord.http.Route.BASE = fake.api_base`` and
``discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import secrets
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.platform import Clock

API = "/api/v10"
DISCORD_EPOCH_MS = 1420070400000
INTENT_GUILDS = 1 << 0
INTENT_GUILD_MESSAGES = 1 << 9
INTENT_MESSAGE_CONTENT = 1 << 15
MANAGE_GUILD = 1 << 5
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


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # exactly "application/json": discord.py parses nothing else (no "; charset=...")
    return web.Response(
        body=json.dumps(data).encode(),
        status=status,
        headers={**(headers or {}), "Content-Type": "application/json"},
    )


def _error(status: int, code: int, message: str) -> web.Response:
    return _json({"message": message, "code": code}, status)


class FakeDiscord:
    """One guild, one bot; everything it receives is in ``calls``."""

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

    # -- life --------------------------------------------------------------------------------

    async def start(self) -> FakeDiscord:
        app = web.Application(middlewares=[self._record])
        app.router.add_get("/gateway", self._gateway)
        r = app.router
        r.add_get(f"{API}/users/@me", self._me)
        r.add_get(f"{API}/oauth2/applications/@me", self._application)
        r.add_get(f"{API}/gateway", self._gateway_url)
        r.add_get(f"{API}/gateway/bot", self._gateway_url)
        r.add_get(f"{API}/guilds/{{guild}}/channels", self._list_channels)
        r.add_get(f"{API}/guilds/{{guild}}/members/{{user}}", self._get_member)
        r.add_post(f"{API}/guilds/{{guild}}/channels", self._create_channel)
        r.add_delete(f"{API}/channels/{{channel}}", self._delete_channel)
        r.add_get(f"{API}/channels/{{channel}}/webhooks", self._list_webhooks)
        r.add_post(f"{API}/channels/{{channel}}/webhooks", self._create_webhook)
        r.add_post(f"{API}/channels/{{channel}}/messages", self._post_message)
        r.add_get(f"{API}/channels/{{channel}}/messages", self._history)
        r.add_post(f"{API}/channels/{{channel}}/typing", self._typing)
        r.add_post(f"{API}/users/@me/channels", self._open_dm)
        r.add_put(
            f"{API}/channels/{{channel}}/messages/{{mid}}/reactions/{{emoji}}/@me", self._react
        )
        r.add_post(f"{API}/webhooks/{{hook}}/{{token}}", self._execute_webhook)
        r.add_patch(f"{API}/webhooks/{{hook}}/{{token}}/messages/{{mid}}", self._edit_original)
        r.add_delete(f"{API}/webhooks/{{hook}}/{{token}}/messages/{{mid}}", self._delete_original)
        r.add_get(f"{API}/applications/{{app}}/guilds/{{guild}}/commands", self._get_commands)
        r.add_put(f"{API}/applications/{{app}}/guilds/{{guild}}/commands", self._put_commands)
        r.add_post(f"{API}/interactions/{{iid}}/{{token}}/callback", self._callback)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        for ws in list(self.sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_base(self) -> str:
        return self.url + API

    @property
    def gateway_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/gateway"

    # -- what tests use ----------------------------------------------------------------------

    def snowflake(self) -> int:
        """A real-looking snowflake (17-20 digits, time in the high bits)."""
        return ((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22) | next(self._counter)

    def fail_next(
        self,
        route: str,
        status: int,
        body: Json,
        headers: dict[str, str] | None = None,
        *,
        stored: bool = False,
        drop: bool = False,
    ) -> None:
        """The next call of ``route`` ("execute_webhook", "create_webhook", ...) gets this;
        with ``stored`` (execute_webhook) the message is posted first; with ``drop`` the
        connection closes instead."""
        self.faults[route].append(Fault(status, body, headers or {}, stored, drop))

    def calls_of(self, method: str, pattern: str) -> list[Call]:
        """Calls whose path matches the regular expression ``pattern`` (anchored)."""
        return [c for c in self.calls if c.method == method and re.fullmatch(pattern, c.path)]

    def channel_named(self, name: str, type_: int = 0) -> Json:
        found = [c for c in self.channels.values() if c["name"] == name and c["type"] == type_]
        assert len(found) == 1, f"{len(found)} channels named {name!r}"
        return found[0]

    async def delete_channel(self, channel_id: str) -> None:
        """As if someone deleted the channel (its webhooks go with it)."""
        channel = self.channels.pop(channel_id)
        for hook_id in [h for h, w in self.webhooks.items() if w["channel_id"] == channel_id]:
            del self.webhooks[hook_id]
        await self.dispatch("CHANNEL_DELETE", channel)

    def add_text_channel(self, name: str, parent_id: str | None = None, type_: int = 0) -> Json:
        """A channel someone made by hand (before the bot starts)."""
        return self._channel(name, type_, parent_id, None)

    def add_foreign_webhooks(self, channel_id: str, count: int) -> None:
        """Webhooks of other integrations in a channel (they count towards its 15)."""
        for n in range(count):
            hook_id = str(self.snowflake())
            self.webhooks[hook_id] = {
                "id": hook_id,
                "type": 1,
                "guild_id": str(self.guild_id),
                "channel_id": channel_id,
                "name": f"Other {n}",
                "avatar": None,
                "token": secrets.token_urlsafe(24),
                "application_id": None,
                "user": {
                    "id": str(self.snowflake()),
                    "username": "someone",
                    "discriminator": "0",
                    "avatar": None,
                },
            }

    def add_proxy_bot(self, app_id: int, name: str) -> Json:
        """A proxy bot (PluralKit, Tupperbox) in the server; returns its webhook."""
        user = self.add_member(name)
        self.users.pop(user["id"])
        member = self.members.pop(user["id"])
        user.update(id=str(app_id), bot=True)
        self.users[user["id"]] = user
        self.members[user["id"]] = {**member, "user": user}
        return {"application_id": str(app_id), "id": str(self.snowflake()), "user": user}

    async def proxy_says(
        self, proxy: Json, member: Json, channel_id: str, content: str, character: str
    ) -> None:
        """A member writes; the proxy deletes the message and reposts it under ``character``
        through its webhook, as PluralKit does."""
        original = await self.member_says(member, channel_id, content)
        await self.dispatch(
            "MESSAGE_DELETE",
            {"id": original["id"], "channel_id": channel_id, "guild_id": str(self.guild_id)},
        )
        author = {"id": proxy["id"], "username": character, "discriminator": "0000", "bot": True}
        author["avatar"] = None
        repost = self._message(channel_id, content, author, webhook_id=proxy["id"])
        repost["application_id"] = proxy["application_id"]
        self.messages.append(repost)
        await self.dispatch("MESSAGE_CREATE", self._as_received(repost))

    def delete_webhook(self, hook_id: str) -> None:
        """As if someone deleted the webhook in the server settings."""
        del self.webhooks[hook_id]

    def add_member(self, name: str, *, admin: bool = False) -> Json:
        user_id = str(self.snowflake())
        user = {
            "id": user_id,
            "username": name.lower(),
            "discriminator": "0",
            "global_name": name,
            "avatar": None,
        }
        self.users[user_id] = user
        self.members[user_id] = {
            "user": user,
            "nick": None,
            "roles": [str(self.admin_role_id)] if admin else [],
            "joined_at": _now(),
            "deaf": False,
            "mute": False,
            "flags": 0,
        }
        return user

    async def member_says(
        self, user: Json, channel_id: str, content: str, *, mention_bot: bool = False
    ) -> Json:
        """A member writes in a channel: MESSAGE_CREATE as Discord would send it to the bot."""
        member = {k: v for k, v in self.members[user["id"]].items() if k != "user"}
        mentions = [self.bot_user] if mention_bot else []
        if mention_bot:
            content = f"<@{self.app_id}> {content}"
        message = self._message(channel_id, content, user, member=member, mentions=mentions)
        await self.dispatch("MESSAGE_CREATE", self._as_received(message))
        return message

    async def other_bot_says(self, channel_id: str, content: str) -> Json:
        """Another bot (not ours) writes in a channel."""
        robot = {
            "id": str(self.snowflake()),
            "username": "robot",
            "discriminator": "0",
            "bot": True,
        }
        message = self._message(channel_id, content, robot)
        await self.dispatch("MESSAGE_CREATE", self._as_received(message))
        return message

    async def slash(self, user: Json, channel_id: str, name: str, options: list[Json]) -> str:
        """A member runs a slash command: INTERACTION_CREATE; returns the interaction token."""
        command = next(c for c in self.commands if c["name"] == name)
        member = dict(self.members[user["id"]])
        member["permissions"] = str(self._permissions(member))
        token = "itoken-" + secrets.token_hex(8)
        payload: Json = {
            "id": str(self.snowflake()),
            "application_id": str(self.app_id),
            "type": 2,
            "token": token,
            "version": 1,
            "data": {
                "id": command["id"],
                "name": name,
                "type": 1,
                "options": options,
                "guild_id": str(self.guild_id),
            },
            "guild_id": str(self.guild_id),
            "guild": {"id": str(self.guild_id), "locale": "en-US", "features": []},
            "channel_id": channel_id,
            "channel": self.channels[channel_id],
            "member": member,
            "app_permissions": str(MEMBER_PERMISSIONS),
            "locale": "en-US",
            "guild_locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": str(self.guild_id)},
            "context": 0,
            "attachment_size_limit": 8 * 1024 * 1024,
        }
        self.interactions[token] = InteractionRecord(payload, created=self.clock())
        await self.dispatch("INTERACTION_CREATE", payload)
        return token

    async def dispatch(self, event: str, data: Json) -> None:
        """Send a gateway event to every connected client."""
        self._seq += 1
        frame = {"op": 0, "t": event, "s": self._seq, "d": data}
        for ws in list(self.sockets):
            if not ws.closed:
                await ws.send_str(json.dumps(frame))

    def webhook_messages(self, channel_id: str | None = None) -> list[Json]:
        return [
            m
            for m in self.messages
            if m.get("webhook_id") and m["webhook_id"] != str(self.app_id)
            if channel_id is None or m["channel_id"] == channel_id
        ]

    # -- REST --------------------------------------------------------------------------------

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path.startswith(API):
            body: Any = None
            if request.can_read_body:
                raw = await request.read()
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
            path = request.path[len(API) :]
            self.calls.append(Call(request.method, path, dict(request.query), body))
            auth = request.headers.get("Authorization", "")
            if auth:
                self.token_seen.append(auth)
                if not self.token_valid:
                    return _error(401, 0, "401: Unauthorized")
        response: web.StreamResponse = await handler(request)
        return response

    def _missing(self, permission: int) -> web.Response | None:
        """403 Missing Permissions if the bot's role lacks ``permission``."""
        if self.bot_permissions & permission == permission:
            return None
        if not self.bot_permissions & VIEW_CHANNEL:
            return _error(403, 50001, "Missing Access")
        return _error(403, 50013, "Missing Permissions")

    def _fault(self, route: str) -> web.Response | None:
        if not self.faults[route]:
            return None
        fault = self.faults[route].pop(0)
        return _json(fault.body, fault.status, fault.headers)

    async def _me(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != "Bot test-token":
            return _error(401, 0, "401: Unauthorized")
        return _json(self.bot_user)

    async def _application(self, request: web.Request) -> web.Response:
        return _json(
            {
                "id": str(self.app_id),
                "name": "Bottown",
                "icon": None,
                "description": "",
                "rpc_origins": [],
                "bot_public": True,
                "bot_require_code_grant": False,
                "owner": {**self.bot_user, "id": str(self.owner_id), "bot": False},
                "team": None,
                "verify_key": "0" * 64,
                "flags": 0,
                "summary": "",
            }
        )

    async def _gateway_url(self, request: web.Request) -> web.Response:
        limit = {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}
        return _json({"url": self.gateway_url, "shards": 1, "session_start_limit": limit})

    async def _get_member(self, request: web.Request) -> web.Response:
        member = self.members.get(request.match_info["user"])
        return _json(member) if member else _error(404, 10007, "Unknown Member")

    async def _list_channels(self, request: web.Request) -> web.Response:
        return _json(list(self.channels.values()))

    async def _create_channel(self, request: web.Request) -> web.Response:
        if fault := self._fault("create_channel"):
            return fault
        if refused := self._missing(MANAGE_CHANNELS):
            return refused
        body = await _body(request)
        type_ = int(body.get("type", 0))
        name = str(body["name"])
        if len(self.channels) >= CHANNELS_PER_GUILD:
            return _error(400, 30013, "Maximum number of guild channels reached (500)")
        parent = str(body.get("parent_id") or "")
        siblings = [c for c in self.channels.values() if (c.get("parent_id") or "") == parent]
        if parent and len(siblings) >= CHANNELS_PER_CATEGORY:
            return _invalid(
                "parent_id",
                "CHANNEL_PARENT_MAX_CHANNELS",
                "Maximum number of channels in category reached (50)",
            )
        if type_ == 0:  # Discord's rule for text channels
            name = re.sub(r"[^\w-]", "", re.sub(r"\s+", "-", name.strip().lower()))
        channel = self._channel(name, type_, body.get("parent_id"), body.get("topic"))
        await self.dispatch("CHANNEL_CREATE", channel)
        return _json(channel, 201)

    async def _delete_channel(self, request: web.Request) -> web.Response:
        channel = self.channels.pop(request.match_info["channel"], None)
        if channel is None:
            return _error(404, 10003, "Unknown Channel")
        for hook_id in [h for h, w in self.webhooks.items() if w["channel_id"] == channel["id"]]:
            del self.webhooks[hook_id]
        await self.dispatch("CHANNEL_DELETE", channel)
        return _json(channel)

    async def _list_webhooks(self, request: web.Request) -> web.Response:
        channel_id = request.match_info["channel"]
        if channel_id not in self.channels:
            return _error(404, 10003, "Unknown Channel")
        if refused := self._missing(MANAGE_WEBHOOKS):
            return refused
        return _json([w for w in self.webhooks.values() if w["channel_id"] == channel_id])

    async def _create_webhook(self, request: web.Request) -> web.Response:
        if fault := self._fault("create_webhook"):
            return fault
        channel_id = request.match_info["channel"]
        if channel_id not in self.channels:
            return _error(404, 10003, "Unknown Channel")
        if refused := self._missing(MANAGE_WEBHOOKS):
            return refused
        if sum(w["channel_id"] == channel_id for w in self.webhooks.values()) >= 15:
            return _error(400, 30007, "Maximum number of webhooks reached (15)")
        name = str((await _body(request))["name"])
        if _refused_name(name, self.refused_names):
            return _invalid("name", "USERNAME_INVALID", "Invalid name")
        hook_id = str(self.snowflake())
        hook = {
            "id": hook_id,
            "type": 1,
            "guild_id": str(self.guild_id),
            "channel_id": channel_id,
            "name": name,
            "avatar": None,
            "token": secrets.token_urlsafe(24),
            "application_id": str(self.app_id),
            "user": self.bot_user,
        }
        self.webhooks[hook_id] = hook
        return _json(hook)

    async def _post_message(self, request: web.Request) -> web.Response:
        if fault := self._fault("post_message"):
            return fault
        channel_id = request.match_info["channel"]
        if channel_id in self.dms:
            return await self._post_direct(request, channel_id)
        if channel_id not in self.channels:
            return _error(404, 10003, "Unknown Channel")
        if refused := self._missing(VIEW_CHANNEL | SEND_MESSAGES):
            return refused
        body = await _body(request)
        if body.get("enforce_nonce") and body.get("nonce"):  # a repeat gets the first message
            for earlier in self.messages:
                if earlier["channel_id"] == channel_id and earlier.get("nonce") == body["nonce"]:
                    return _json(earlier)
        message = self._message(channel_id, body.get("content", ""), self.bot_user, body=body)
        if body.get("nonce"):
            message["nonce"] = body["nonce"]
        self.messages.append(message)
        await self.dispatch("MESSAGE_CREATE", self._as_received(message))
        return _json(message)

    async def _open_dm(self, request: web.Request) -> web.Response:
        user_id = str((await _body(request))["recipient_id"])
        if user_id not in self.users:
            return _error(404, 10013, "Unknown User")
        found = next((c for c, u in self.dms.items() if u == user_id), None)
        channel_id = found or str(self.snowflake())
        self.dms[channel_id] = user_id
        return _json(
            {
                "id": channel_id,
                "type": 1,
                "last_message_id": None,
                "recipients": [self.users[user_id]],
            }
        )

    async def _post_direct(self, request: web.Request, channel_id: str) -> web.Response:
        if self.dms[channel_id] in self.closed_dms:
            return _error(403, 50007, "Cannot send messages to this user")
        body = await _body(request)
        message = self._message(channel_id, body.get("content", ""), self.bot_user, body=body)
        del message["guild_id"]
        message["to"] = self.dms[channel_id]  # whom it went to, for the tests
        self.direct.append(message)
        return _json(message)

    async def _typing(self, request: web.Request) -> web.Response:
        channel_id = request.match_info["channel"]
        if channel_id not in self.channels:
            return _error(404, 10003, "Unknown Channel")
        if refused := self._missing(VIEW_CHANNEL | SEND_MESSAGES):
            return refused
        self.typing.append(channel_id)
        return web.Response(status=204)

    async def _history(self, request: web.Request) -> web.Response:
        channel_id = request.match_info["channel"]
        if channel_id not in self.channels:
            return _error(404, 10003, "Unknown Channel")
        if refused := self._missing(VIEW_CHANNEL | READ_HISTORY):
            return refused
        after = int(request.query.get("after", 0))
        limit = min(int(request.query.get("limit", 50)), 100)
        found = [
            {k: v for k, v in m.items() if k not in ("body", "pinged")}
            for m in self.messages
            if m["channel_id"] == channel_id and int(m["id"]) > after
        ]
        if after:  # Discord: the oldest ones after ``after``, newest first
            return _json(list(reversed(found[:limit])))
        return _json(list(reversed(found))[:limit])

    async def _react(self, request: web.Request) -> web.Response:
        if refused := self._missing(ADD_REACTIONS):
            return refused
        info = request.match_info
        self.reactions.append((info["channel"], info["mid"], info["emoji"]))
        return web.Response(status=204)

    async def _execute_webhook(self, request: web.Request) -> web.Response:
        hook_id, token = request.match_info["hook"], request.match_info["token"]
        if hook_id == str(self.app_id):
            return await self._followup(request, token)
        fault = self.faults["execute_webhook"].pop(0) if self.faults["execute_webhook"] else None
        if fault is not None and not fault.stored:
            return _answer(request, fault)
        hook = self.webhooks.get(hook_id)
        if hook is None or hook["token"] != token:
            return _error(404, 10015, "Unknown Webhook")
        if limited := self._webhook_rate(hook["channel_id"]):
            return limited
        body = await _body(request)
        name = str(body.get("username") or hook["name"])
        if not 1 <= len(name) <= 80 or _refused_name(name, self.refused_names):
            return _invalid("username", "USERNAME_INVALID", f"Username {name!r} is not allowed")
        if len(body.get("content", "")) > 2000:
            return _error(400, 50035, "Invalid Form Body (content: 2000 or fewer in length)")
        author = {
            "id": hook_id,
            "username": name,
            "discriminator": "0000",
            "avatar": None,
            "bot": True,
        }
        message = self._message(
            hook["channel_id"], body.get("content", ""), author, body=body, webhook_id=hook_id
        )
        self.messages.append(message)
        await self.dispatch("MESSAGE_CREATE", self._as_received(message))
        if fault is not None:
            return _answer(request, fault)
        if request.query.get("wait", "").lower() in ("1", "true"):
            return _json(message)
        return web.Response(status=204)

    def _webhook_rate(self, channel_id: str) -> web.Response | None:
        """429 past a channel's webhook limit or the server's shared webhook bucket."""
        now = self.clock()
        for limit, seconds, mine in (
            (*CHANNEL_WEBHOOK_LIMIT, lambda c: c == channel_id),
            (*SHARED_WEBHOOK_LIMIT, lambda c: True),
        ):
            # inclusive: a post exactly one window ago still counts (Discord's resets round
            # up), so pacing exactly at a cap draws 429s, as it does on Discord
            recent = [t for t, c in self.webhook_posts if mine(c) and t >= now - seconds]
            if len(recent) >= limit:
                self.throttled += 1
                wait = round(recent[0] + seconds - now, 3)
                body = {"message": "You are being rate limited.", "retry_after": wait}
                headers = {
                    "Retry-After": str(max(1, int(wait + 0.999))),
                    "X-RateLimit-Reset-After": str(wait),
                    "X-RateLimit-Scope": "shared",
                    "Via": "1.1 google",
                }
                return _json({**body, "global": False}, 429, headers)
        self.webhook_posts.append((now, channel_id))
        return None

    async def _followup(self, request: web.Request, token: str) -> web.Response:
        record = self.interactions.get(token)
        if record is None:
            return _error(404, 10015, "Unknown Webhook")
        if self.clock() - record.created > 15 * 60:
            return _error(401, 50027, "Invalid Webhook Token")
        body = await _body(request)
        channel_id = record.payload["channel_id"]
        if record.original is not None and not (record.original_edited or record.original_deleted):
            # Discord: the first follow-up after a deferral edits the "thinking" message and
            # keeps its flags (an ephemeral deferral stays ephemeral).
            content = body.get("content", "")
            record.original.update(
                content=content, body=body, pinged=_pinged(content, body.get("allowed_mentions"))
            )
            record.original["flags"] &= ~LOADING
            record.original_edited = True
            message = record.original
        else:
            message = self._message(channel_id, body.get("content", ""), self.bot_user, body=body)
            message["flags"] = int(body.get("flags", 0))
            message["webhook_id"] = str(self.app_id)
        record.followups.append(message)
        if not message["flags"] & EPHEMERAL:
            self.messages.append(message)
        return _json(message)

    async def _edit_original(self, request: web.Request) -> web.Response:
        record = self.interactions.get(request.match_info["token"])
        if record is None or record.original is None or record.original_deleted:
            return _error(404, 10008, "Unknown Message")
        body = await _body(request)
        record.original.update(content=body.get("content", ""), body=body)
        record.original_edited = True
        return _json(record.original)

    async def _delete_original(self, request: web.Request) -> web.Response:
        record = self.interactions.get(request.match_info["token"])
        if record is None or record.original is None or record.original_deleted:
            return _error(404, 10008, "Unknown Message")
        record.original_deleted = True
        return web.Response(status=204)

    async def _get_commands(self, request: web.Request) -> web.Response:
        return _json(self.commands)

    async def _put_commands(self, request: web.Request) -> web.Response:
        by_name = {c["name"]: c for c in self.commands}
        stored = []
        for body in await _body(request):
            old = by_name.get(body["name"])
            stored.append(
                {
                    "type": 1,
                    "options": [],
                    "default_member_permissions": None,
                    "nsfw": False,
                    "contexts": None,
                    "integration_types": [0],
                    **body,
                    "id": old["id"] if old else str(self.snowflake()),
                    "application_id": str(self.app_id),
                    "guild_id": request.match_info["guild"],
                    "version": str(self.snowflake()),
                }
            )
        self.commands = stored
        return _json(stored)

    async def _callback(self, request: web.Request) -> web.Response:
        if fault := self._fault("callback"):
            return fault
        record = self.interactions.get(request.match_info["token"])
        if record is not None and self.clock() - record.created > 3.0:
            return _error(404, 10062, "Unknown interaction")
        if record is None or record.callbacks:
            return _error(400, 40060, "Interaction has already been acknowledged.")
        body = await _body(request)
        record.callbacks.append(body)
        data = body.get("data") or {}
        flags = int(data.get("flags", 0))
        kind = int(body["type"])
        if kind == 5:
            flags |= LOADING
        channel_id = record.payload["channel_id"]
        message = self._message(channel_id, data.get("content", ""), self.bot_user, body=data)
        message.update(flags=flags, webhook_id=str(self.app_id))
        record.original = message
        if kind == 4 and not flags & EPHEMERAL:
            self.messages.append(message)
        interaction = {
            "id": record.payload["id"],
            "type": 2,
            "response_message_id": message["id"],
            "response_message_loading": kind == 5,
            "response_message_ephemeral": bool(flags & EPHEMERAL),
        }
        return _json({"interaction": interaction, "resource": {"type": kind, "message": message}})

    # -- gateway -----------------------------------------------------------------------------

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

    # -- payloads ----------------------------------------------------------------------------

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
                    "joined_at": _now(),
                    "deaf": False,
                    "mute": False,
                    "flags": 0,
                }
            ],
            "member_count": 1 + len(self.members),
            "large": False,
            "unavailable": False,
            "joined_at": _now(),
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
            "timestamp": _now(),
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
            message["pinged"] = _pinged(content, body.get("allowed_mentions"))
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


def _refused_name(name: str, extra: set[str]) -> bool:
    """Discord's rules for a webhook's name (and the names a test adds)."""
    lowered = name.casefold()
    return bool(re.search("discord|clyde", lowered)) or lowered in ("everyone", "here", *extra)


def _invalid(field_name: str, code: str, message: str) -> web.Response:
    """400 Invalid Form Body with the field's error, as Discord answers it."""
    errors = {field_name: {"_errors": [{"code": code, "message": message}]}}
    return _json({"code": 50035, "errors": errors, "message": "Invalid Form Body"}, 400)


def _answer(request: web.Request, fault: Fault) -> web.Response:
    if fault.drop:
        assert request.transport is not None
        request.transport.close()  # no answer: the client sees the connection end
    return _json(fault.body, fault.status, fault.headers)


def _pinged(content: str, allowed: Json | None) -> list[str]:
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


async def _body(request: web.Request) -> Any:
    raw = await request.read()  # aiohttp keeps the body: the middleware read it already
    return json.loads(raw) if raw else {}


def _now() -> str:
    return datetime.now(UTC).isoformat()

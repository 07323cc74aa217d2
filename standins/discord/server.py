"""A local stand-in for Discord: the REST API and the gateway that discord.py talks to.

An aiohttp server on 127.0.0.1 with any number of guilds, each its own roles, members, channels
and commands; the bot is in some of them (``invite``: GUILD_CREATE; ``remove_bot``: GUILD_DELETE,
its webhooks and commands there gone, and 403 Missing Access (50001) on the guild's routes
after). It serves the routes the adapter uses (login,
application info, guild channels, webhooks and their execution, channel messages (and one by
id), direct messages, reactions, application commands, interaction callbacks and follow-ups)
and a gateway websocket (HELLO, IDENTIFY -> READY + GUILD_CREATE, heartbeats, RESUME; shards,
close codes and session start limits as Discord has them: ``standins.discord.sessions``). Tests push
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

import json
import re
import secrets
from typing import Any

from aiohttp import web

from standins.discord.guild import Guild
from standins.discord.interactions import Interactions
from standins.discord.members import Members
from standins.discord.wire import (
    ADD_REACTIONS,
    API,
    CHANNEL_WEBHOOK_LIMIT,
    CHANNELS_PER_CATEGORY,
    CHANNELS_PER_GUILD,
    MANAGE_CHANNELS,
    MANAGE_WEBHOOKS,
    READ_HISTORY,
    SEND_MESSAGES,
    SHARED_WEBHOOK_LIMIT,
    VIEW_CHANNEL,
    WEBHOOKS_PER_CHANNEL,
    Call,
    Fault,
    Json,
    answer,
    body_of,
    components_problem,
    error,
    invalid,
    json_response,
    refused_name,
)


class FakeDiscord(Interactions, Members):
    """One bot in any number of guilds (``home`` from the start, ``add_guild`` and
    ``invite`` for more); everything it receives is in ``calls``."""

    # -- life --------------------------------------------------------------------------------

    async def start(self) -> FakeDiscord:
        app = web.Application(middlewares=[self._record])
        app.router.add_get("/gateway", self.sessions.serve)
        r = app.router
        r.add_get(f"{API}/users/@me", self._me)
        r.add_get(f"{API}/oauth2/applications/@me", self._application)
        r.add_get(f"{API}/gateway", self._gateway)
        r.add_get(f"{API}/gateway/bot", self._gateway_bot)
        r.add_get(f"{API}/guilds/{{guild}}/channels", self._list_channels)
        r.add_get(f"{API}/guilds/{{guild}}/members/{{user}}", self._get_member)
        r.add_post(f"{API}/guilds/{{guild}}/channels", self._create_channel)
        r.add_delete(f"{API}/channels/{{channel}}", self._delete_channel)
        r.add_get(f"{API}/channels/{{channel}}/webhooks", self._list_webhooks)
        r.add_post(f"{API}/channels/{{channel}}/webhooks", self._create_webhook)
        r.add_post(f"{API}/channels/{{channel}}/messages", self._post_message)
        r.add_get(f"{API}/channels/{{channel}}/messages", self._history)
        r.add_get(f"{API}/channels/{{channel}}/messages/{{mid}}", self._get_message)
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

    # -- what tests use ----------------------------------------------------------------------

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

    def channel_named(self, name: str, type_: int = 0, guild: Guild | None = None) -> Json:
        mine = str((guild or self.home).id)
        found = [
            c
            for c in self.channels.values()
            if c["name"] == name and c["type"] == type_ and c["guild_id"] == mine
        ]
        assert len(found) == 1, f"{len(found)} channels named {name!r}"
        return found[0]

    async def delete_channel(self, channel_id: str) -> None:
        """As if someone deleted the channel (its webhooks go with it)."""
        channel = self.channels.pop(channel_id)
        for hook_id in [h for h, w in self.webhooks.items() if w["channel_id"] == channel_id]:
            del self.webhooks[hook_id]
        await self.dispatch("CHANNEL_DELETE", channel)

    def add_text_channel(
        self, name: str, parent_id: str | None = None, type_: int = 0, guild: Guild | None = None
    ) -> Json:
        """A channel someone made by hand (before the bot starts)."""
        return self._channel(name, type_, parent_id, None, guild)

    def add_foreign_webhooks(self, channel_id: str, count: int) -> None:
        """Webhooks of other integrations in a channel (they count towards its 15)."""
        for n in range(count):
            hook_id = str(self.snowflake())
            self.webhooks[hook_id] = {
                "id": hook_id,
                "type": 1,
                "guild_id": self.channels[channel_id]["guild_id"],
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

    def delete_webhook(self, hook_id: str) -> None:
        """As if someone deleted the webhook in the server settings."""
        del self.webhooks[hook_id]

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
                    return error(401, 0, "401: Unauthorized")
        response: web.StreamResponse = await handler(request)
        return response

    async def _me(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != "Bot test-token":
            return error(401, 0, "401: Unauthorized")
        return json_response(self.bot_user)

    async def _application(self, request: web.Request) -> web.Response:
        return json_response(
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

    async def _gateway(self, request: web.Request) -> web.Response:
        return json_response({"url": self.gateway_url})

    async def _gateway_bot(self, request: web.Request) -> web.Response:
        """The gateway's URL, the shards Discord recommends, and the session start limit."""
        return json_response(
            {
                "url": self.gateway_url,
                "shards": self.sessions.recommended_shards(),
                "session_start_limit": self.sessions.limit.payload(self.clock()),
            }
        )

    def _guild_in(self, request: web.Request, permission: int = 0) -> Guild | web.Response:
        """The route's guild, or Discord's refusal: unknown, the bot not in it, a permission
        its role there lacks."""
        guild = self.guilds.get(request.match_info["guild"])
        if guild is None:
            return error(404, 10004, "Unknown Guild")
        return self._missing(permission, guild) or guild

    def _channel_in(self, channel_id: str, permission: int) -> Guild | web.Response:
        """The channel's guild, or Discord's refusal: an unknown channel, the bot not in its
        server, a permission its role lacks."""
        if channel_id not in self.channels:
            return error(404, 10003, "Unknown Channel")
        guild = self.guild_of(channel_id)
        return self._missing(permission, guild) or guild

    async def _get_member(self, request: web.Request) -> web.Response:
        guild = self._guild_in(request)
        if isinstance(guild, web.Response):
            return guild
        member = guild.members.get(request.match_info["user"])
        return json_response(member) if member else error(404, 10007, "Unknown Member")

    async def _list_channels(self, request: web.Request) -> web.Response:
        guild = self._guild_in(request)
        if isinstance(guild, web.Response):
            return guild
        mine = str(guild.id)
        return json_response([c for c in self.channels.values() if c["guild_id"] == mine])

    async def _create_channel(self, request: web.Request) -> web.Response:
        if fault := self._fault("create_channel"):
            return fault
        guild = self._guild_in(request, MANAGE_CHANNELS)
        if isinstance(guild, web.Response):
            return guild
        body = await body_of(request)
        type_ = int(body.get("type", 0))
        name = str(body["name"])
        theirs = [c for c in self.channels.values() if c["guild_id"] == str(guild.id)]
        if len(theirs) >= CHANNELS_PER_GUILD:
            return error(400, 30013, "Maximum number of guild channels reached (500)")
        parent = str(body.get("parent_id") or "")
        siblings = [c for c in theirs if (c.get("parent_id") or "") == parent]
        if parent and len(siblings) >= CHANNELS_PER_CATEGORY:
            return invalid(
                "parent_id",
                "CHANNEL_PARENT_MAX_CHANNELS",
                "Maximum number of channels in category reached (50)",
            )
        if type_ == 0:  # Discord's rule for text channels
            name = re.sub(r"[^\w-]", "", re.sub(r"\s+", "-", name.strip().lower()))
        channel = self._channel(name, type_, body.get("parent_id"), body.get("topic"), guild)
        await self.dispatch("CHANNEL_CREATE", channel)
        return json_response(channel, 201)

    async def _delete_channel(self, request: web.Request) -> web.Response:
        found = self._channel_in(request.match_info["channel"], MANAGE_CHANNELS)
        if isinstance(found, web.Response):
            return found
        channel = self.channels.pop(request.match_info["channel"])
        for hook_id in [h for h, w in self.webhooks.items() if w["channel_id"] == channel["id"]]:
            del self.webhooks[hook_id]
        await self.dispatch("CHANNEL_DELETE", channel)
        return json_response(channel)

    async def _list_webhooks(self, request: web.Request) -> web.Response:
        channel_id = request.match_info["channel"]
        if isinstance(refused := self._channel_in(channel_id, MANAGE_WEBHOOKS), web.Response):
            return refused
        return json_response([w for w in self.webhooks.values() if w["channel_id"] == channel_id])

    async def _create_webhook(self, request: web.Request) -> web.Response:
        if fault := self._fault("create_webhook"):
            return fault
        channel_id = request.match_info["channel"]
        guild = self._channel_in(channel_id, MANAGE_WEBHOOKS)
        if isinstance(guild, web.Response):
            return guild
        if (
            sum(w["channel_id"] == channel_id for w in self.webhooks.values())
            >= WEBHOOKS_PER_CHANNEL
        ):
            return error(400, 30007, "Maximum number of webhooks reached (15)")
        name = str((await body_of(request))["name"])
        if refused_name(name, self.refused_names):
            return invalid("name", "USERNAME_INVALID", "Invalid name")
        hook_id = str(self.snowflake())
        hook = {
            "id": hook_id,
            "type": 1,
            "guild_id": str(guild.id),
            "channel_id": channel_id,
            "name": name,
            "avatar": None,
            "token": secrets.token_urlsafe(24),
            "application_id": str(self.app_id),
            "user": self.bot_user,
        }
        self.webhooks[hook_id] = hook
        return json_response(hook)

    async def _post_message(self, request: web.Request) -> web.Response:
        if fault := self._fault("post_message"):
            return fault
        channel_id = request.match_info["channel"]
        if channel_id in self.dms:
            return await self._post_direct(request, channel_id)
        if isinstance(
            refused := self._channel_in(channel_id, VIEW_CHANNEL | SEND_MESSAGES), web.Response
        ):
            return refused
        body = await body_of(request)
        if body.get("enforce_nonce") and body.get("nonce"):  # a repeat gets the first message
            for earlier in self.messages:
                if earlier["channel_id"] == channel_id and earlier.get("nonce") == body["nonce"]:
                    return json_response(earlier)
        message = self._message(channel_id, body.get("content", ""), self.bot_user, body=body)
        if body.get("nonce"):
            message["nonce"] = body["nonce"]
        self.messages.append(message)
        await self.dispatch("MESSAGE_CREATE", self._as_received(message))
        return json_response(message)

    async def _open_dm(self, request: web.Request) -> web.Response:
        user_id = str((await body_of(request))["recipient_id"])
        if user_id not in self.users:
            return error(404, 10013, "Unknown User")
        found = next((c for c, u in self.dms.items() if u == user_id), None)
        channel_id = found or str(self.snowflake())
        self.dms[channel_id] = user_id
        return json_response(
            {
                "id": channel_id,
                "type": 1,
                "last_message_id": None,
                "recipients": [self.users[user_id]],
            }
        )

    async def _post_direct(self, request: web.Request, channel_id: str) -> web.Response:
        if self.dms[channel_id] in self.closed_dms:
            return error(403, 50007, "Cannot send messages to this user")
        body = await body_of(request)
        if problem := components_problem(body):
            return error(400, 50035, f"Invalid Form Body ({problem})")
        message = self._message(channel_id, body.get("content", ""), self.bot_user, body=body)
        del message["guild_id"]
        message["to"] = self.dms[channel_id]  # whom it went to, for the tests
        self.direct.append(message)
        return json_response(message)

    async def _typing(self, request: web.Request) -> web.Response:
        channel_id = request.match_info["channel"]
        if isinstance(
            refused := self._channel_in(channel_id, VIEW_CHANNEL | SEND_MESSAGES), web.Response
        ):
            return refused
        self.typing.append(channel_id)
        return web.Response(status=204)

    async def _history(self, request: web.Request) -> web.Response:
        channel_id = request.match_info["channel"]
        if isinstance(
            refused := self._channel_in(channel_id, VIEW_CHANNEL | READ_HISTORY), web.Response
        ):
            return refused
        after = int(request.query.get("after", 0))
        limit = min(int(request.query.get("limit", 50)), 100)
        found = [
            {k: v for k, v in m.items() if k not in ("body", "pinged")}
            for m in self.messages
            if m["channel_id"] == channel_id and int(m["id"]) > after
        ]
        if after:  # Discord: the oldest ones after ``after``, newest first
            return json_response(list(reversed(found[:limit])))
        return json_response(list(reversed(found))[:limit])

    async def _get_message(self, request: web.Request) -> web.Response:
        channel_id, message_id = request.match_info["channel"], request.match_info["mid"]
        if isinstance(
            refused := self._channel_in(channel_id, VIEW_CHANNEL | READ_HISTORY), web.Response
        ):
            return refused
        for m in self.messages:
            if m["channel_id"] == channel_id and m["id"] == message_id:
                return json_response({k: v for k, v in m.items() if k not in ("body", "pinged")})
        return error(404, 10008, "Unknown Message")

    async def _react(self, request: web.Request) -> web.Response:
        info = request.match_info
        if info["channel"] not in self.dms and isinstance(
            refused := self._channel_in(info["channel"], ADD_REACTIONS), web.Response
        ):
            return refused
        self.reactions.append((info["channel"], info["mid"], info["emoji"]))
        return web.Response(status=204)

    async def _execute_webhook(self, request: web.Request) -> web.Response:
        hook_id, token = request.match_info["hook"], request.match_info["token"]
        if hook_id == str(self.app_id):
            return await self._followup(request, token)
        fault = self.faults["execute_webhook"].pop(0) if self.faults["execute_webhook"] else None
        if fault is not None and not fault.stored:
            return answer(request, fault)
        hook = self.webhooks.get(hook_id)
        if hook is None or hook["token"] != token:
            return error(404, 10015, "Unknown Webhook")
        if limited := self._webhook_rate(hook["channel_id"], self.guild_of(hook["channel_id"])):
            return limited
        body = await body_of(request)
        name = str(body.get("username") or hook["name"])
        if not 1 <= len(name) <= 80 or refused_name(name, self.refused_names):
            return invalid("username", "USERNAME_INVALID", f"Username {name!r} is not allowed")
        if len(body.get("content", "")) > 2000:
            return error(400, 50035, "Invalid Form Body (content: 2000 or fewer in length)")
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
            return answer(request, fault)
        if request.query.get("wait", "").lower() in ("1", "true"):
            return json_response(message)
        return web.Response(status=204)

    def _webhook_rate(self, channel_id: str, guild: Guild) -> web.Response | None:
        """429 past a channel's webhook limit or the server's shared webhook bucket."""
        now = self.clock()
        for limit, seconds, mine in (
            (*CHANNEL_WEBHOOK_LIMIT, lambda c: c == channel_id),
            (*SHARED_WEBHOOK_LIMIT, lambda c: True),
        ):
            # inclusive: a post exactly one window ago still counts (Discord's resets round
            # up), so pacing exactly at a cap draws 429s, as it does on Discord
            recent = [t for t, c in guild.webhook_posts if mine(c) and t >= now - seconds]
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
                return json_response({**body, "global": False}, 429, headers)
        guild.webhook_posts.append((now, channel_id))
        return None

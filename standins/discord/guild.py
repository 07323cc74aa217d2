"""The fake Discord's state: its guilds (each with its roles, members and commands), their
payloads as Discord sends them, and their events (GUILD_CREATE and GUILD_DELETE as the bot is
invited and removed) handed to the gateway's sessions (``standins.discord.sessions``)."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from aiohttp import web

from standins.clock import Clock
from standins.discord.sessions import Sessions, in_shard
from standins.discord.wire import (
    API,
    BOT_PERMISSIONS,
    DISCORD_EPOCH_MS,
    INTENT_MESSAGE_CONTENT,
    MANAGE_GUILD,
    MEMBER_PERMISSIONS,
    VIEW_CHANNEL,
    Call,
    Fault,
    InteractionRecord,
    Json,
    error,
    json_response,
    now,
    pinged,
)


class Guild:
    """One server: its roles, members, commands and the bot's place in it (``bot_in``: the
    bot was invited and not removed since). Its channels live in the service's ``channels``,
    each naming its guild."""

    def __init__(self, service: Service, name: str) -> None:
        self._snowflake = service.snowflake
        self.id = service.snowflake()
        self.name = name
        self.owner_id = service.snowflake()
        self.admin_role_id = service.snowflake()
        self.roles: list[Json] = [
            role(self.id, "@everyone", MEMBER_PERMISSIONS, 0),
            role(self.admin_role_id, "Mayor", MEMBER_PERMISSIONS | MANAGE_GUILD, 1),
        ]
        self.members: dict[str, Json] = {}
        self.commands: list[Json] = []
        self.bot_permissions = BOT_PERMISSIONS
        self.bot_role_id = service.snowflake()
        self.bot_in = False
        self.webhook_posts: list[tuple[float, str]] = []  # (time, channel id) of each post

    def add_role(self, name: str, permissions: int = MEMBER_PERMISSIONS) -> Json:
        """A role made in the server settings (before the bot connects; ``make_role`` after)."""
        made = role(self._snowflake(), name, permissions, len(self.roles))
        self.roles.append(made)
        return made

    def permissions(self, member: Json) -> int:
        value = MEMBER_PERMISSIONS
        for r in self.roles:
            if r["id"] in member["roles"]:
                value |= int(r["permissions"])
        return value


def role(role_id: int, name: str, permissions: int, position: int) -> Json:
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


class Service:
    """One bot in any number of guilds: the state every route reads and changes. The first
    guild (``home``, which the bot is in from the start) answers to the one-guild names the
    tests have always used (``guild_id``, ``members``, ``bot_permissions``, ...)."""

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
        self.guilds: dict[str, Guild] = {}
        self.users: dict[str, Json] = {}
        self.channels: dict[str, Json] = {}
        self.webhooks: dict[str, Json] = {}
        self.messages: list[Json] = []  # every message created in the guilds' channels
        self.direct: list[Json] = []  # every direct message the bot sent
        self.dms: dict[str, str] = {}  # DM channel id -> the member's user id
        self.closed_dms: set[str] = set()  # user ids who take no direct messages (403 50007)
        self.reactions: list[tuple[str, str, str]] = []  # (channel id, message id, emoji)
        self.typing: list[str] = []  # channel ids the bot showed typing in
        self.calls: list[Call] = []
        self.faults: dict[str, list[Fault]] = defaultdict(list)
        self.interactions: dict[str, InteractionRecord] = {}
        self.identifies: list[Json] = []
        self.sockets: list[web.WebSocketResponse] = []
        self.connected = asyncio.Event()
        self.intents = 0
        self.token_valid = True
        self.refused_names: set[str] = set()  # names Discord refuses beyond its known rules
        # the time webhook rate limits and interaction deadlines are judged on (a bench: real)
        self.clock: Callable[[], float] = Clock()
        self.throttled = 0  # 429s answered by the rate limits
        self.watchers: list[Callable[[str, Json], None]] = []  # told every gateway event sent
        self.sessions = Sessions(self)  # the gateway's sessions, shards and start limits
        self._runner: web.AppRunner | None = None
        self.url = ""
        self.home = self.add_guild(guild_name)
        self.home.bot_in = True

    # -- guilds ------------------------------------------------------------------------------

    def add_guild(self, name: str, shard: tuple[int, int] | None = None) -> Guild:
        """A server the bot is not in yet (``invite`` brings it in); ``shard`` (id, count): one
        whose id that shard owns."""
        guild = Guild(self, name)
        if shard is not None:
            guild.id = in_shard(guild.id, *shard)
        self.guilds[str(guild.id)] = guild
        return guild

    async def invite(self, guild: Guild) -> None:
        """The bot is added to the server: GUILD_CREATE, as Discord sends on a join (without
        ``unavailable``, which marks a guild of READY's coming available)."""
        guild.bot_in = True
        if self.connected.is_set():
            joined = {k: v for k, v in self._guild(guild).items() if k != "unavailable"}
            await self.dispatch("GUILD_CREATE", joined)

    async def remove_bot(self, guild: Guild) -> None:
        """Someone removes the bot from the server: its webhooks and commands there go with
        it, and GUILD_DELETE (no ``unavailable``: removed, not an outage)."""
        guild.bot_in = False
        guild.commands = []
        mine = str(self.app_id)
        for hook_id, hook in list(self.webhooks.items()):
            if hook["guild_id"] == str(guild.id) and hook.get("application_id") == mine:
                del self.webhooks[hook_id]
        await self.dispatch("GUILD_DELETE", {"id": str(guild.id)})

    async def make_role(
        self, guild: Guild, name: str, permissions: int = MEMBER_PERMISSIONS
    ) -> Json:
        """Someone makes a role in the server settings: GUILD_ROLE_CREATE to the bot there."""
        made = guild.add_role(name, permissions)
        if guild.bot_in and self.connected.is_set():
            await self.dispatch("GUILD_ROLE_CREATE", {"guild_id": str(guild.id), "role": made})
        return made

    def guild_of(self, channel_id: str) -> Guild:
        return self.guilds[self.channels[channel_id]["guild_id"]]

    # the home guild under the names of the one-guild fake
    @property
    def guild_id(self) -> int:
        return self.home.id

    @property
    def guild_name(self) -> str:
        return self.home.name

    @property
    def owner_id(self) -> int:
        return self.home.owner_id

    @property
    def admin_role_id(self) -> int:
        return self.home.admin_role_id

    @property
    def roles(self) -> list[Json]:
        return self.home.roles

    @property
    def members(self) -> dict[str, Json]:
        return self.home.members

    @property
    def bot_role_id(self) -> int:
        return self.home.bot_role_id

    @property
    def bot_permissions(self) -> int:
        return self.home.bot_permissions

    @bot_permissions.setter
    def bot_permissions(self, value: int) -> None:
        self.home.bot_permissions = value

    @property
    def commands(self) -> list[Json]:
        return self.home.commands

    @property
    def webhook_posts(self) -> list[tuple[float, str]]:
        return self.home.webhook_posts

    # -- refusals, as Discord answers them -------------------------------------------------------

    def _missing(self, permission: int, guild: Guild) -> web.Response | None:
        """403 Missing Access for a server the bot is not in (or cannot see), 403 Missing
        Permissions if its role there lacks ``permission``."""
        if guild.bot_in and guild.bot_permissions & permission == permission:
            return None
        if not guild.bot_in or not guild.bot_permissions & VIEW_CHANNEL:
            return error(403, 50001, "Missing Access")
        return error(403, 50013, "Missing Permissions")

    def _fault(self, route: str) -> web.Response | None:
        if not self.faults[route]:
            return None
        fault = self.faults[route].pop(0)
        return json_response(fault.body, fault.status, fault.headers)

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
        """Send a gateway event to the sessions of its guild's shard
        (``standins.discord.sessions``)."""
        for watcher in self.watchers:
            watcher(event, data)
        await self.sessions.dispatch(event, data)

    def present(self) -> list[int]:
        return [guild.id for guild in self.guilds.values() if guild.bot_in]

    def guild_created(self, guild_id: int) -> Json:
        return self._guild(self.guilds[str(guild_id)])

    def _guild(self, guild: Guild) -> Json:
        """GUILD_CREATE's payload for ``guild``."""
        return {
            "id": str(guild.id),
            "name": guild.name,
            "icon": None,
            "owner_id": str(guild.owner_id),
            "roles": [
                *guild.roles,
                {
                    **role(guild.bot_role_id, "Bottown", guild.bot_permissions, len(guild.roles)),
                    "managed": True,
                },
            ],
            "emojis": [],
            "stickers": [],
            "features": [],
            "channels": [c for c in self.channels.values() if c["guild_id"] == str(guild.id)],
            "threads": [],
            "members": [
                {
                    "user": self.bot_user,
                    "roles": [str(guild.bot_role_id)],
                    "joined_at": now(),
                    "deaf": False,
                    "mute": False,
                    "flags": 0,
                }
            ],
            "member_count": 1 + len(guild.members),
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

    def _channel(
        self, name: str, type_: int, parent: Any, topic: Any, guild: Guild | None = None
    ) -> Json:
        guild = guild or self.home
        channel_id = str(self.snowflake())
        channel = {
            "id": channel_id,
            "type": type_,
            "guild_id": str(guild.id),
            "name": name,
            "position": sum(c["guild_id"] == str(guild.id) for c in self.channels.values()),
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
            "guild_id": self.channels[channel_id]["guild_id"]
            if channel_id in self.channels
            else "",
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

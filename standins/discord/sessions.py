"""The fake Discord's gateway: sessions, their shards and the limits on starting them, as
Discord keeps them.

A session is one accepted IDENTIFY: its shard ``[id, count]`` (``[0, 1]`` when the bot does not
shard), its sequence and every event it was sent. An event goes only to the sessions whose shard
owns its guild (``(guild_id >> 22) % count``); an event of no guild (a direct message) to shard
0. Like Discord, the gateway

- closes 4004 for a wrong token, 4010 for an invalid shard, 4011 when the session would hold
  more than 2,500 guilds (sharding required), 4013 for unknown intents and 4014 for privileged
  intents the bot is not allowed (``privileged``, the Developer Portal's switches);
- answers Invalid Session (op 9, not resumable) to an IDENTIFY whose rate-limit key
  (``shard_id % max_concurrency``) identified less than 5 seconds before, on ``clock``;
- counts each session started against ``session_start_limit`` (``GET /gateway/bot``): one past
  ``remaining`` and the bot's token is reset (every session closed 4004, the REST API 401),
  as Discord's documentation says it does;
- keeps a session's events while its connection is down (``drop``): a RESUME with its id and
  the last sequence the client saw gets the missed events in order, then RESUMED; a RESUME of
  a session it does not know gets op 9.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from aiohttp import WSMsgType, web

from standins.discord.wire import Json

TOKEN = "test-token"
GUILDS_PER_SHARD = 2500  # more in one session: close 4011, sharding required
GUILDS_PER_RECOMMENDED_SHARD = 1000  # what GET /gateway/bot recommends ``shards`` by
IDENTIFY_WINDOW_S = 5.0  # one IDENTIFY per rate-limit key in this many seconds
DAY_S = 24 * 3600.0
# every intent Discord knows (bits 0-16, 20, 21, 24, 25); others: close 4013
KNOWN_INTENTS = (1 << 17) - 1 | 1 << 20 | 1 << 21 | 1 << 24 | 1 << 25
PRIVILEGED_INTENTS = 1 << 1 | 1 << 8 | 1 << 15  # members, presences, message content

AUTHENTICATION_FAILED = 4004
INVALID_SHARD = 4010
SHARDING_REQUIRED = 4011
INVALID_INTENTS = 4013
DISALLOWED_INTENTS = 4014


@dataclass
class Session:
    """One gateway session: its shard, its sequence, the events it was sent (kept for a
    resume), and its connection while one is open."""

    id: str
    shard_id: int
    shard_count: int
    intents: int
    ws: web.WebSocketResponse | None = None
    request: web.Request | None = None
    seq: int = 0
    sent: list[tuple[int, str]] = field(default_factory=list)  # (sequence, frame)

    def owns(self, guild_id: int | None) -> bool:
        if guild_id is None:
            return self.shard_id == 0
        return (guild_id >> 22) % self.shard_count == self.shard_id

    async def send(self, event: str, data: Json) -> None:
        self.seq += 1
        frame = json.dumps({"op": 0, "t": event, "s": self.seq, "d": data})
        self.sent.append((self.seq, frame))
        await self.deliver(frame)

    async def deliver(self, frame: str) -> None:
        """To the open connection, if any; a connection that went away misses it (kept)."""
        if self.ws is None or self.ws.closed:
            return
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await self.ws.send_str(frame)


@dataclass
class StartLimit:
    """``session_start_limit``: sessions a bot may start in a day, and how many at once."""

    total: int = 1000
    max_concurrency: int = 1
    used: int = 0
    resets_at: float | None = None  # a day after the period's first start

    def remaining(self, now: float) -> int:
        if self.resets_at is not None and now >= self.resets_at:
            self.used, self.resets_at = 0, None
        return self.total - self.used

    def take(self, now: float) -> bool:
        """One session started; False if none remained."""
        if self.remaining(now) <= 0:
            return False
        if self.resets_at is None:
            self.resets_at = now + DAY_S
        self.used += 1
        return True

    def payload(self, now: float) -> Json:
        remaining = self.remaining(now)
        reset_after = 0 if self.resets_at is None else self.resets_at - now
        return {
            "total": self.total,
            "remaining": remaining,
            "reset_after": int(reset_after * 1000),
            "max_concurrency": self.max_concurrency,
        }


def in_shard(snowflake: int, shard_id: int, count: int) -> int:
    """The snowflake moved on by the fewest milliseconds that put it in that shard."""
    ms = snowflake >> 22
    return (ms + (shard_id - ms) % count) << 22 | snowflake & ((1 << 22) - 1)


def guild_of_event(event: str, data: Json) -> int | None:
    """The guild an event belongs to (a guild's own events name it ``id``)."""
    raw = data.get("id") if event.startswith("GUILD_") and "guild_id" not in data else None
    raw = raw or data.get("guild_id")
    return int(raw) if raw else None


class Bot(Protocol):
    """What the gateway reads and changes of the fake's state (``guild.Service``)."""

    bot_user: Json
    app_id: int
    token_valid: bool
    intents: int  # of the last session identified
    identifies: list[Json]
    sockets: list[web.WebSocketResponse]
    connected: asyncio.Event
    clock: Callable[[], float]

    @property
    def gateway_url(self) -> str: ...

    def present(self) -> list[int]:
        """The ids of the guilds the bot is in."""
        ...

    def guild_created(self, guild_id: int) -> Json:
        """GUILD_CREATE's payload for the guild."""
        ...


class Sessions:
    """The gateway's sessions: ``serve`` is the websocket route, ``dispatch`` routes an event
    to the sessions of its guild's shard."""

    def __init__(self, service: Bot) -> None:
        self.service = service
        self.live: dict[str, Session] = {}  # session id -> session (open or resumable)
        self.limit = StartLimit()
        self.privileged = PRIVILEGED_INTENTS  # what the portal allows the bot
        self.identified_at: dict[int, float] = {}  # rate-limit key -> its last IDENTIFY
        self.refused: list[tuple[str, int]] = []  # (why, shard id): what the gateway refused

    # -- what tests use ----------------------------------------------------------------------

    def of_shard(self, shard_id: int) -> list[Session]:
        return [s for s in self.live.values() if s.shard_id == shard_id]

    def drop(self, shard_id: int) -> None:
        """The shard's connection drops (no close frame): its session stays resumable."""
        for session in self.of_shard(shard_id):
            if session.request is not None and session.request.transport is not None:
                session.request.transport.close()
            session.ws = session.request = None

    def recommended_shards(self) -> int:
        guilds = len(self.service.present())
        return max(1, math.ceil(guilds / GUILDS_PER_RECOMMENDED_SHARD))

    # -- events --------------------------------------------------------------------------------

    async def dispatch(self, event: str, data: Json) -> None:
        guild_id = guild_of_event(event, data)
        for session in list(self.live.values()):
            if session.owns(guild_id):
                await session.send(event, data)

    # -- the websocket -------------------------------------------------------------------------

    async def serve(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.service.sockets.append(ws)
        await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 41250}}))
        mine: Session | None = None
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                frame = json.loads(msg.data)
                op = frame.get("op")
                if op == 1:
                    await ws.send_str(json.dumps({"op": 11}))
                elif op == 2:
                    mine = await self._identify(ws, request, frame["d"]) or mine
                elif op == 6:
                    mine = await self._resume(ws, request, frame["d"]) or mine
        finally:
            self.service.sockets.remove(ws)
            if mine is not None and mine.ws is ws:
                mine.ws = mine.request = None
                if ws.close_code in (1000, 1001):  # the client ended it: not resumable
                    self.live.pop(mine.id, None)
        return ws

    async def _identify(
        self, ws: web.WebSocketResponse, request: web.Request, data: Json
    ) -> Session | None:
        service = self.service
        service.identifies.append(data)
        shard_id, count = data.get("shard") or [0, 1]
        intents = int(data.get("intents", 0))
        now = service.clock()
        closing = self._refusal(data, int(shard_id), int(count), intents)
        if closing is not None:
            self.refused.append((closing[1], int(shard_id)))
            await ws.close(code=closing[0], message=closing[1].encode())
            return None
        key = shard_id % self.limit.max_concurrency
        if now - self.identified_at.get(key, -math.inf) < IDENTIFY_WINDOW_S:
            self.refused.append(("identified too soon", shard_id))
            await ws.send_str(json.dumps({"op": 9, "d": False}))
            return None
        if not self.limit.take(now):
            self.refused.append(("session start limit", shard_id))
            await self._reset_token()
            await ws.close(code=AUTHENTICATION_FAILED, message=b"Token reset.")
            return None
        self.identified_at[key] = now
        service.intents = intents
        session = Session(secrets.token_hex(8), shard_id, count, intents, ws, request)
        self.live[session.id] = session
        owned = [g for g in service.present() if session.owns(g)]
        ready = {
            "v": 10,
            "user": service.bot_user,
            "guilds": [{"id": str(g), "unavailable": True} for g in owned],
            "session_id": session.id,
            "resume_gateway_url": service.gateway_url,
            "shard": [shard_id, count],
            "application": {"id": str(service.app_id), "flags": 0},
            "private_channels": [],
            "relationships": [],
        }
        await session.send("READY", ready)
        for guild in owned:
            await session.send("GUILD_CREATE", service.guild_created(guild))
        service.connected.set()
        return session

    def _refusal(
        self, data: Json, shard_id: int, count: int, intents: int
    ) -> tuple[int, str] | None:
        """The close code and reason Discord would end this IDENTIFY with, if any."""
        if data.get("token") != TOKEN or not self.service.token_valid:
            return AUTHENTICATION_FAILED, "Authentication failed."
        if count < 1 or not 0 <= shard_id < count:
            return INVALID_SHARD, "Invalid shard."
        if intents & ~KNOWN_INTENTS:
            return INVALID_INTENTS, "Invalid intent(s)."
        if intents & PRIVILEGED_INTENTS & ~self.privileged:
            return DISALLOWED_INTENTS, "Disallowed intent(s)."
        owned = sum((g >> 22) % count == shard_id for g in self.service.present())
        if owned > GUILDS_PER_SHARD:
            return SHARDING_REQUIRED, "Sharding required."
        return None

    async def _reset_token(self) -> None:
        """Past the day's session starts: Discord resets the bot's token and ends every
        session."""
        self.service.token_valid = False
        for session in list(self.live.values()):
            if session.ws is not None:
                await session.ws.close(code=AUTHENTICATION_FAILED, message=b"Token reset.")
        self.live.clear()

    async def _resume(
        self, ws: web.WebSocketResponse, request: web.Request, data: Json
    ) -> Session | None:
        session = self.live.get(str(data.get("session_id")))
        if session is None or data.get("token") != TOKEN or not self.service.token_valid:
            await ws.send_str(json.dumps({"op": 9, "d": False}))
            return None
        if session.ws is not None and session.ws is not ws:
            await session.ws.close(code=4000, message=b"Resumed elsewhere.")
        session.ws, session.request = ws, request
        seen = int(data.get("seq") or 0)
        for seq, frame in session.sent:
            if seq > seen:
                await session.deliver(frame)
        await session.send("RESUMED", {})
        return session

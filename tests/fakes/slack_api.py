"""A stand-in for Slack on 127.0.0.1: the Web API methods the town uses, response URLs and the
Socket Mode websocket, speaking Slack's wire format and recording everything it was asked.

Web API: ``POST /api/<method>`` with a form or JSON body (or query parameters), the bot token in
``Authorization: Bearer``, answers ``{"ok": true, ...}`` or ``{"ok": false, "error": ...}`` as
Slack does. ``fail(method, ...)`` queues a fault for the next call of a method: a status (429 with
``Retry-After``, 500) or an API error code (``rate_limited``, ``fatal_error``, ...), and with
``stored`` the call takes effect first (a post stored, then a 5xx or, with ``drop``, the
connection closed without an answer). ``auth_error`` answers every bot-token call with a
credentials error (``token_revoked``, ``missing_scope`` with the scope ``needed``), as a revoked
token or a scope taken away does. ``conversations.history`` returns a channel's messages, their
metadata only with ``include_all_metadata``; ``conversations.replies`` a thread. Socket Mode:
``apps.connections.open`` (app-level token) hands out ``ws://127.0.0.1:<port>/link``; the
websocket says hello, sends every queued envelope and records the acks it gets back.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

BOT_TOKEN = "xoxb-test-bot-token"
APP_TOKEN = "xapp-test-app-token"
TEAM_ID = "T0TOWN"
TEAM_NAME = "Town Workspace"
BOT_USER_ID = "U0BOT"
BOT_ID = "B0BOT"

_POSTED_BY = {"type": "message", "bot_id": BOT_ID, "app_id": "A0TOWN", "user": BOT_USER_ID}
_CHANNEL_NAME = re.compile(r"^[a-z0-9_-]{1,80}$")


@dataclass(frozen=True)
class Call:
    method: str
    params: dict[str, Any]
    token: str


@dataclass(frozen=True)
class Fault:
    status: int = 200
    error: str = ""
    retry_after: int | None = None
    stored: bool = False  # the call takes effect before the fault is answered
    drop: bool = False  # the connection closes instead of an answer


@dataclass
class FakeSlack:
    """The workspace's state and the log of every request."""

    base: str = ""
    calls: list[Call] = field(default_factory=list)
    channels: dict[str, dict[str, Any]] = field(default_factory=dict)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)
    ephemerals: list[dict[str, Any]] = field(default_factory=list)
    responses: list[dict[str, Any]] = field(default_factory=list)  # posts to response URLs
    envelopes: list[dict[str, Any]] = field(default_factory=list)  # for the next websocket
    acks: list[dict[str, Any]] = field(default_factory=list)
    sockets: int = 0
    live: list[web.WebSocketResponse] = field(default_factory=list)  # open Socket Mode links
    page_size: int = 2  # conversations.list pages are small, so paging is exercised
    faults: dict[str, deque[Fault]] = field(default_factory=dict)
    auth_error: str = ""  # set: every bot-token call answers this (a revoked token, ...)
    needed_scope: str = "chat:write"  # named by a missing_scope answer
    news: asyncio.Event = field(default_factory=asyncio.Event)  # set on every request or ack
    _seq: int = 0

    @property
    def api_url(self) -> str:
        return f"{self.base}/api/"

    def response_url(self, name: str) -> str:
        return f"{self.base}/respond/{name}"

    def fail(
        self,
        method: str,
        *,
        status: int = 200,
        error: str = "",
        retry_after: int | None = None,
        stored: bool = False,
        drop: bool = False,
    ) -> None:
        fault = Fault(status, error, retry_after, stored, drop)
        self.faults.setdefault(method, deque()).append(fault)

    async def send_envelope(self, envelope: dict[str, Any]) -> None:
        """An envelope over every open Socket Mode link (a redelivery: ``retry_attempt`` > 0)."""
        for ws in list(self.live):
            if not ws.closed:
                await ws.send_json(envelope)

    async def disconnect(self, reason: str = "refresh_requested") -> None:
        """Slack's notice that it will close the link; the client opens a new one."""
        await self.send_envelope({"type": "disconnect", "reason": reason, "debug_info": {}})

    def add_user(
        self, user_id: str, name: str, *, admin: bool = False, owner: bool = False
    ) -> None:
        self.users[user_id] = {
            "id": user_id,
            "team_id": TEAM_ID,
            "name": name.lower().replace(" ", "."),
            "real_name": name,
            "is_admin": admin,
            "is_owner": owner,
            "is_bot": False,
            "profile": {"display_name": name.split()[0], "real_name": name},
        }

    def add_channel(self, name: str, *, archived: bool = False, member: bool = False) -> str:
        return str(self._new_channel(name, archived=archived, member=member)["id"])

    def called(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def messages_in(self, channel_name: str) -> list[dict[str, Any]]:
        ids = {cid for cid, c in self.channels.items() if c["name"] == channel_name}
        return [m for m in self.messages if m["channel"] in ids]

    def outbox_posts(self) -> list[tuple[str, str, str]]:
        """Each posted message that carries an outbox key in its metadata, in order:
        (channel id, key, ts)."""
        found = []
        for m in list(self.messages):
            metadata = m.get("metadata")
            if isinstance(metadata, str):
                metadata = json.loads(metadata)
            if isinstance(metadata, dict) and metadata.get("event_type") == "bottown_outbox":
                key = str((metadata.get("event_payload") or {}).get("key", ""))
                found.append((str(m["channel"]), key, str(m["ts"])))
        return found

    def channel_id(self, name: str) -> str:
        live = [c for c in self.channels.values() if c["name"] == name and not c["is_archived"]]
        assert len(live) == 1, f"{len(live)} live channels named {name!r}"
        return str(live[0]["id"])

    # -- the Web API --------------------------------------------------------------------

    def _new_channel(self, name: str, *, archived: bool, member: bool) -> dict[str, Any]:
        self._seq += 1
        channel = {
            "id": f"C{self._seq:06d}",
            "name": name,
            "is_channel": True,
            "is_private": False,
            "is_archived": archived,
            "is_member": member,
            "created": 1700000000 + self._seq,
        }
        self.channels[str(channel["id"])] = channel
        return channel

    def _next_ts(self) -> str:
        self._seq += 1  # Slack's ts: the time it was stored, unique in the channel
        return f"{int(time.time())}.{self._seq:06d}"

    def answer(self, method: str, p: dict[str, Any], token: str) -> dict[str, Any]:
        if method == "apps.connections.open":
            if not token.startswith("xapp-"):
                return {"ok": False, "error": "not_allowed_token_type"}
            return {"ok": True, "url": self.base.replace("http://", "ws://") + "/link"}
        if token != BOT_TOKEN:
            return {"ok": False, "error": "invalid_auth"}
        if self.auth_error == "missing_scope":
            return {"ok": False, "error": "missing_scope", "needed": self.needed_scope}
        if self.auth_error:
            return {"ok": False, "error": self.auth_error}
        if method == "auth.test":
            return {
                "ok": True,
                "url": "https://town.slack.example/",
                "team": TEAM_NAME,
                "team_id": TEAM_ID,
                "user": "bottown",
                "user_id": BOT_USER_ID,
                "bot_id": BOT_ID,
            }
        if method == "users.info":
            user = self.users.get(str(p.get("user")))
            return {"ok": True, "user": user} if user else {"ok": False, "error": "user_not_found"}
        if method == "conversations.list":
            return self._list(p)
        if method == "conversations.create":
            return self._create(p)
        channel = self.channels.get(str(p.get("channel")))
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        if method == "conversations.info":
            return {"ok": True, "channel": channel}
        if method == "conversations.history":
            return self._history(channel, p)
        if method == "conversations.replies":
            return self._replies(channel, p)
        if method == "conversations.join":
            if channel["is_archived"]:
                return {"ok": False, "error": "is_archived"}
            channel["is_member"] = True
            return {"ok": True, "channel": channel}
        if method == "conversations.setPurpose":
            purpose = str(p.get("purpose", ""))
            if len(purpose) > 250:
                return {"ok": False, "error": "too_long"}
            if not channel["is_member"]:
                return {"ok": False, "error": "not_in_channel"}
            channel["purpose"] = {"value": purpose}
            return {"ok": True, "purpose": purpose}
        if method in ("chat.postMessage", "chat.postEphemeral"):
            return self._post(method, channel, p)
        return {"ok": False, "error": "unknown_method"}

    def _list(self, p: dict[str, Any]) -> dict[str, Any]:
        everything = [
            c
            for c in self.channels.values()
            if not (_truthy(p.get("exclude_archived")) and c["is_archived"])
        ]
        start = int(p.get("cursor") or 0)
        page = everything[start : start + self.page_size]
        more = start + self.page_size < len(everything)
        next_cursor = str(start + self.page_size) if more else ""
        return {"ok": True, "channels": page, "response_metadata": {"next_cursor": next_cursor}}

    def _history(self, channel: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        """Newest first, from ``oldest`` on; metadata only when asked for (as Slack does)."""
        if not channel["is_member"]:
            return {"ok": False, "error": "not_in_channel"}
        oldest = float(p.get("oldest") or 0)
        found = [
            m for m in self.messages if m["channel"] == channel["id"] and float(m["ts"]) > oldest
        ]
        found.reverse()
        start = int(p.get("cursor") or 0)
        size = min(int(p.get("limit") or 100), 999)
        page = []
        for m in found[start : start + size]:
            shown = {k: v for k, v in m.items() if k not in ("metadata", "channel")}
            metadata = m.get("metadata")
            if isinstance(metadata, str):
                metadata = json.loads(metadata)
            if metadata and _truthy(p.get("include_all_metadata")):
                shown["metadata"] = metadata
            page.append(shown)
        more = start + size < len(found)
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + size) if more else ""},
        }

    def _replies(self, channel: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        """A thread: its first message (ts ``ts``), then the replies to it, oldest first."""
        if not channel["is_member"]:
            return {"ok": False, "error": "not_in_channel"}
        ts = str(p.get("ts") or "")
        thread = [
            {k: v for k, v in m.items() if k not in ("metadata", "channel")}
            for m in self.messages
            if m["channel"] == channel["id"] and ts in (m["ts"], m.get("thread_ts"))
        ]
        if not thread:
            return {"ok": False, "error": "thread_not_found"}
        size = min(int(p.get("limit") or 1000), 1000)
        return {"ok": True, "messages": thread[:size], "has_more": len(thread) > size}

    def member_posted(self, channel: str, user: str, text: str, **extra: Any) -> str:
        """A member's message stored in a channel (its event is the test's to send); its ts."""
        ts = self._next_ts()
        self.messages.append(
            {"type": "message", "channel": channel, "user": user, "text": text, "ts": ts, **extra}
        )
        return ts

    def _create(self, p: dict[str, Any]) -> dict[str, Any]:
        name = str(p.get("name", ""))
        if not _CHANNEL_NAME.match(name):
            return {"ok": False, "error": "invalid_name_specials"}
        if any(c["name"] == name for c in self.channels.values()):
            return {"ok": False, "error": "name_taken"}
        return {"ok": True, "channel": self._new_channel(name, archived=False, member=True)}

    def _post(self, method: str, channel: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
        if channel["is_archived"]:
            return {"ok": False, "error": "is_archived"}
        if not channel["is_member"]:
            return {"ok": False, "error": "not_in_channel"}
        if not p.get("text"):
            return {"ok": False, "error": "no_text"}
        blocks = p.get("blocks")
        if isinstance(blocks, str):  # a form-encoded call sends them as JSON text
            blocks = json.loads(blocks)
        if problem := blocks_problem(blocks):
            return {"ok": False, "error": "invalid_blocks", "errors": [problem]}
        ts = self._next_ts()
        record = {"channel": channel["id"], "ts": ts, **p}
        if method == "chat.postEphemeral":
            self.ephemerals.append(record)
            return {"ok": True, "message_ts": ts}
        self.messages.append({**_POSTED_BY, **record})  # as Slack stores an app's post
        return {"ok": True, "channel": channel["id"], "ts": ts, "message": {"text": p["text"]}}


def blocks_problem(blocks: Any) -> str | None:
    """What Slack would refuse in a message's Block Kit blocks (the kinds the town sends)."""
    if blocks is None:
        return None
    if not isinstance(blocks, list) or not 1 <= len(blocks) <= 50:
        return "blocks must be a list of 1 to 50 blocks"
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "section":
            text = block.get("text") or {}
            if (
                text.get("type") not in ("mrkdwn", "plain_text")
                or not 1 <= len(str(text.get("text") or "")) <= 3000
            ):
                return "a section's text is 1 to 3000 characters"
        elif kind == "actions":
            for element in block.get("elements") or [None]:
                if not isinstance(element, dict) or element.get("type") != "button":
                    return "actions hold buttons here"
                label = element.get("text") or {}
                if label.get("type") != "plain_text" or not 1 <= len(label.get("text", "")) <= 75:
                    return "a button's text is plain_text of 1 to 75 characters"
                if not 1 <= len(str(element.get("action_id") or "")) <= 255:
                    return "a button's action_id is 1 to 255 characters"
                if len(str(element.get("value") or "")) > 2000:
                    return "a button's value is at most 2000 characters"
                if element.get("style") not in (None, "primary", "danger"):
                    return "a button's style is primary or danger"
        else:
            return f"unknown block type {kind!r}"
    return None


def _truthy(value: Any) -> bool:
    return str(value).lower() in ("1", "true")


async def _params(request: web.Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        params.update(await request.json())
    elif request.can_read_body:
        params.update({k: v for k, v in (await request.post()).items() if isinstance(v, str)})
    return params


def _app(fake: FakeSlack) -> web.Application:
    async def api(request: web.Request) -> web.Response:
        method = request.match_info["method"]
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        params = await _params(request)
        fake.calls.append(Call(method, params, token))
        fake.news.set()
        queued = fake.faults.get(method)
        if queued:
            fault = queued.popleft()
            if fault.stored:
                fake.answer(method, params, token)
            if fault.drop:
                assert request.transport is not None
                request.transport.close()  # no answer: the client sees the connection end
                return web.Response(status=500)
            headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after else {}
            if fault.status >= 500:
                return web.Response(status=fault.status, text="upstream trouble", headers=headers)
            body = {"ok": False, "error": fault.error or "ratelimited"}
            return web.json_response(body, status=fault.status, headers=headers)
        return web.json_response(fake.answer(method, params, token))

    async def respond(request: web.Request) -> web.Response:
        body = await request.json()
        if blocks_problem(body.get("blocks")):
            return web.Response(status=400, text="invalid_blocks")
        fake.responses.append({"name": request.match_info["name"], **body})
        return web.Response(text="ok")

    async def link(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        fake.sockets += 1
        fake.live.append(ws)
        await ws.send_json({"type": "hello", "num_connections": 1, "debug_info": {"host": "x"}})
        while fake.envelopes:
            await ws.send_json(fake.envelopes.pop(0))
        fake.news.set()
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    fake.acks.append(json.loads(message.data))
                    fake.news.set()
        finally:
            fake.live.remove(ws)
        return ws

    app = web.Application()
    app.router.add_route("*", "/api/{method}", api)
    app.router.add_post("/respond/{name}", respond)
    app.router.add_get("/link", link)
    return app


@asynccontextmanager
async def running_fake_slack() -> AsyncIterator[FakeSlack]:
    """The fake Slack, served on a free loopback port for the duration of the block."""
    fake = FakeSlack()
    runner = web.AppRunner(_app(fake), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    fake.base = f"http://{host}:{port}"
    try:
        yield fake
    finally:
        await runner.cleanup()


@contextmanager
def fake_slack_in_thread() -> Iterator[FakeSlack]:
    """The fake Slack served by a thread of its own, for a test that drives another process
    (its calls are recorded in the returned ``FakeSlack``; read them, do not mutate them)."""
    ready: list[FakeSlack] = []
    stop = threading.Event()

    async def serve() -> None:
        async with running_fake_slack() as fake:
            ready.append(fake)
            await asyncio.to_thread(stop.wait)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not ready:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the fake Slack did not start within 30 s")
        time.sleep(0.01)
    try:
        yield ready[0]
    finally:
        stop.set()
        thread.join(5)


async def wait_for(fake: FakeSlack, condition: Callable[[], object], seconds: float = 30.0) -> None:
    """Wait until ``condition()`` holds, checking whenever the fake records something."""
    try:
        async with asyncio.timeout(seconds):
            while not condition():
                fake.news.clear()
                await fake.news.wait()
    except TimeoutError:
        raise AssertionError(
            f"the awaited call never reached the fake Slack ({seconds:g} s)"
        ) from None

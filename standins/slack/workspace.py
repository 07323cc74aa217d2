"""The fake Slack's state: its workspaces (teams), each with its members, channels and bot
token, the app's OAuth credentials, and the Web API's answers, as strict as Slack's.

Web API: ``answer(method, params, token)`` as ``POST /api/<method>`` answers it (``server``):
``{"ok": true, ...}`` or ``{"ok": false, "error": ...}``. A bot token belongs to one workspace:
used on another workspace's channel it finds none (``channel_not_found``), on its users none
(``user_not_found``); an unknown token is ``invalid_auth``, one revoked by an uninstall
``token_revoked``. ``fail(method, ...)`` queues a fault for the next call of a method: a status
(429 with ``Retry-After``, 500) or an API error code, and with ``stored`` the call takes effect
first. ``auth_error`` answers every bot-token call with a credentials error (``token_revoked``,
``missing_scope`` with the scope ``needed``). ``conversations.history`` returns a channel's
messages, their metadata only with ``include_all_metadata``; ``conversations.replies`` a thread.

The install (``oauth.v2.access``): a code the authorize page gave for a workspace is exchanged
once, by the app's client id and secret (HTTP Basic or the form) and the redirect URI it was
given for, for that workspace's bot token (``invalid_client_id``, ``bad_client_secret``,
``invalid_code``, ``bad_redirect_uri``, as Slack answers).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from standins.slack.blocks import blocks_problem

BOT_TOKEN = "xoxb-test-bot-token"
APP_TOKEN = "xapp-test-app-token"
TEAM_ID = "T0TOWN"
TEAM_NAME = "Town Workspace"
BOT_USER_ID = "U0BOT"
BOT_ID = "B0BOT"
APP_ID = "A0TOWN"
CLIENT_ID = "1111.2222"
CLIENT_SECRET = "test-client-secret"
SIGNING_SECRET = "test-signing-secret"
SCOPES = (
    "channels:history,channels:join,channels:manage,channels:read,chat:write,"
    "chat:write.customize,commands,reactions:read,users:read"
)

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
class Team:
    """A workspace: its name, and the app's bot there once installed (``token`` "" before, and
    after an uninstall)."""

    id: str
    name: str
    bot_user_id: str
    bot_id: str
    token: str = ""
    revoked: set[str] = field(default_factory=set)  # tokens an uninstall revoked


@dataclass(frozen=True)
class Grant:
    """What the authorize page gave: a code for a workspace, by whom, for which redirect."""

    team_id: str
    user_id: str
    redirect_uri: str
    scope: str


@dataclass
class FakeSlack:
    """Every workspace's state and the log of every request. The first workspace (``TEAM_ID``)
    has the app installed from the start, with ``BOT_TOKEN``."""

    base: str = ""
    teams: dict[str, Team] = field(default_factory=dict)
    client_id: str = CLIENT_ID
    client_secret: str = CLIENT_SECRET
    signing_secret: str = SIGNING_SECRET
    redirect_uris: list[str] = field(default_factory=list)  # the app's; any, while empty
    request_url: str = ""  # where the app takes events, commands and actions (HTTP mode)
    grants: dict[str, Grant] = field(default_factory=dict)  # codes not yet exchanged
    signed_in: tuple[str, str] = ("", "")  # the browser's workspace and member (authorize)
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
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        home = Team(TEAM_ID, TEAM_NAME, BOT_USER_ID, BOT_ID, token=BOT_TOKEN)
        self.teams.setdefault(TEAM_ID, home)

    def add_team(self, name: str) -> Team:
        """A workspace the app is not installed in yet."""
        n = next(self._ids)
        team = Team(f"T{n:05d}W", name, f"U{n:05d}BOT", f"B{n:05d}BOT")
        self.teams[team.id] = team
        return team

    def authorize(self, params: dict[str, str]) -> tuple[int, str]:
        """The authorize page's answer for the signed-in member approving the install: (302,
        the redirect with ``code`` and ``state``) or (400, why), as Slack's page refuses."""
        if params.get("client_id") != self.client_id:
            return 400, "invalid_client_id"
        redirect = params.get("redirect_uri") or (self.redirect_uris[:1] or [""])[0]
        if not redirect or (self.redirect_uris and redirect not in self.redirect_uris):
            return 400, "bad_redirect_uri"
        team_id, user_id = self.signed_in
        if team_id not in self.teams or self.users.get(user_id, {}).get("team_id") != team_id:
            return 400, "not_signed_in"
        code = f"{next(self._ids)}.{int(time.time())}.code"
        self.grants[code] = Grant(
            team_id, user_id, str(params.get("redirect_uri") or ""), str(params.get("scope"))
        )
        sep = "&" if "?" in redirect else "?"
        return 302, f"{redirect}{sep}code={code}&state={params.get('state', '')}"

    def uninstall(self, team_id: str) -> Team:
        """A workspace admin removes the app: its bot token stops working at once (the events
        Slack then sends are ``server.uninstalled``'s)."""
        team = self.teams[team_id]
        if team.token:
            team.revoked.add(team.token)
        team.token = ""
        return team

    @property
    def api_url(self) -> str:
        return f"{self.base}/api/"

    @property
    def authorize_url(self) -> str:
        """The install page (Slack's ``https://slack.com/oauth/v2/authorize``)."""
        return f"{self.base}/oauth/v2/authorize"

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
        self,
        user_id: str,
        name: str,
        *,
        admin: bool = False,
        owner: bool = False,
        team: str = TEAM_ID,
    ) -> None:
        self.users[user_id] = {
            "id": user_id,
            "team_id": team,
            "name": name.lower().replace(" ", "."),
            "real_name": name,
            "is_admin": admin,
            "is_owner": owner,
            "is_bot": False,
            "profile": {"display_name": name.split()[0], "real_name": name},
        }

    def add_channel(
        self, name: str, *, archived: bool = False, member: bool = False, team: str = TEAM_ID
    ) -> str:
        return str(self._new_channel(name, team, archived=archived, member=member)["id"])

    def called(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def messages_in(self, channel_name: str, team: str | None = None) -> list[dict[str, Any]]:
        ids = {
            cid
            for cid, c in self.channels.items()
            if c["name"] == channel_name and team in (None, c["context_team_id"])
        }
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

    def channel_id(self, name: str, team: str | None = None) -> str:
        live = [
            c
            for c in self.channels.values()
            if c["name"] == name and not c["is_archived"] and team in (None, c["context_team_id"])
        ]
        assert len(live) == 1, f"{len(live)} live channels named {name!r}"
        return str(live[0]["id"])

    # -- the Web API --------------------------------------------------------------------

    def _new_channel(self, name: str, team: str, *, archived: bool, member: bool) -> dict[str, Any]:
        self._seq += 1
        channel = {
            "id": f"C{self._seq:06d}",
            "context_team_id": team,
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

    def team_of(self, token: str) -> Team | None:
        return next((t for t in self.teams.values() if token and t.token == token), None)

    def answer(self, method: str, p: dict[str, Any], token: str, basic: str = "") -> dict[str, Any]:
        if method == "apps.connections.open":
            if not token.startswith("xapp-"):
                return {"ok": False, "error": "not_allowed_token_type"}
            return {"ok": True, "url": self.base.replace("http://", "ws://") + "/link"}
        if method == "oauth.v2.access":
            return self._exchange(p, basic)
        team = self.team_of(token)
        if team is None:
            revoked = any(token in t.revoked for t in self.teams.values())
            return {"ok": False, "error": "token_revoked" if revoked else "invalid_auth"}
        if self.auth_error == "missing_scope":
            return {"ok": False, "error": "missing_scope", "needed": self.needed_scope}
        if self.auth_error:
            return {"ok": False, "error": self.auth_error}
        if method == "auth.test":
            return {
                "ok": True,
                "url": f"https://{team.id.lower()}.slack.example/",
                "team": team.name,
                "team_id": team.id,
                "user": "bottown",
                "user_id": team.bot_user_id,
                "bot_id": team.bot_id,
                "app_id": APP_ID,
            }
        if method == "users.info":
            user = self.users.get(str(p.get("user")))
            if user is None or user["team_id"] != team.id:
                return {"ok": False, "error": "user_not_found"}
            return {"ok": True, "user": user}
        if method == "conversations.list":
            return self._list(team, p)
        if method == "conversations.create":
            return self._create(team, p)
        channel = self.channels.get(str(p.get("channel")))
        if channel is None or channel["context_team_id"] != team.id:
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
            return self._post(team, method, channel, p)
        return {"ok": False, "error": "unknown_method"}

    def _exchange(self, p: dict[str, Any], basic: str) -> dict[str, Any]:
        """``oauth.v2.access``: a code for its workspace's bot token, once."""
        client_id, secret = str(p.get("client_id") or ""), str(p.get("client_secret") or "")
        if basic:
            client_id, _, secret = base64.b64decode(basic).decode().partition(":")
        if client_id != self.client_id:
            return {"ok": False, "error": "invalid_client_id"}
        if secret != self.client_secret:
            return {"ok": False, "error": "bad_client_secret"}
        grant = self.grants.pop(str(p.get("code") or ""), None)
        if grant is None:
            return {"ok": False, "error": "invalid_code"}
        if grant.redirect_uri and p.get("redirect_uri") != grant.redirect_uri:
            return {"ok": False, "error": "bad_redirect_uri"}
        team = self.teams[grant.team_id]
        if not team.token:
            team.token = f"xoxb-{team.id.lower()}-{next(self._ids)}"
        return {
            "ok": True,
            "app_id": APP_ID,
            "authed_user": {"id": grant.user_id},
            "scope": grant.scope or SCOPES,
            "token_type": "bot",
            "access_token": team.token,
            "bot_user_id": team.bot_user_id,
            "team": {"id": team.id, "name": team.name},
            "enterprise": None,
            "is_enterprise_install": False,
        }

    def _list(self, team: Team, p: dict[str, Any]) -> dict[str, Any]:
        everything = [
            c
            for c in self.channels.values()
            if c["context_team_id"] == team.id
            and not (_truthy(p.get("exclude_archived")) and c["is_archived"])
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

    def _create(self, team: Team, p: dict[str, Any]) -> dict[str, Any]:
        name = str(p.get("name", ""))
        if not _CHANNEL_NAME.match(name):
            return {"ok": False, "error": "invalid_name_specials"}
        mine = (c for c in self.channels.values() if c["context_team_id"] == team.id)
        if any(c["name"] == name for c in mine):
            return {"ok": False, "error": "name_taken"}
        made = self._new_channel(name, team.id, archived=False, member=True)
        return {"ok": True, "channel": made}

    def _post(
        self, team: Team, method: str, channel: dict[str, Any], p: dict[str, Any]
    ) -> dict[str, Any]:
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
        posted_by = {"type": "message", "bot_id": team.bot_id, "app_id": APP_ID}
        # as Slack stores an app's post
        self.messages.append({**posted_by, "user": team.bot_user_id, **record})
        return {"ok": True, "channel": channel["id"], "ts": ts, "message": {"text": p["text"]}}


def _truthy(value: Any) -> bool:
    return str(value).lower() in ("1", "true")

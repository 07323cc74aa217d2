"""Slack: the town in a workspace, one public channel per location, each resident posting under
its own name.

Inbound is a slack-bolt ``AsyncApp``: Socket Mode by default (the app-level token), or the HTTP
Events API served with aiohttp on ``host:port`` (Bolt checks every request's signature and its
5-minute replay window). Every listener acks at once and does the town's work in a background
task, so Slack always has its answer within 3 seconds, whatever the engine is doing. A member's
message in a location channel is a visitor speaking there; ``/town <command>`` and
``@bot town <command>`` are chat commands.

Outbound, ``send`` is one ``chat.postMessage`` with the resident's name and an emoji face
(``chat:write.customize``), its outbox idempotency key in the message's metadata. Every text is
escaped so nothing generated can ping anyone.
Retries belong to the outbox pump: the posting client has no retry handlers of its own, and
Slack's answers become ``DeliveryError`` (429 with its Retry-After, 5xx and lost connections
transient, a vanished channel provisioned again once, the rest permanent).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient
from sqlmodel import select

from adapters.core.base import Caller, DeliveryError, Outgoing, TownPort, channel_about
from adapters.slack.text import (
    MARKUP,
    NAME_LIMIT,
    TOWN_ICON,
    channel_name,
    escape,
    icon_emoji,
    numbered,
    unescape,
)
from town.store.db import Store
from town.store.models import ChannelLink

log = logging.getLogger(__name__)

SLACK_API = "https://slack.com/api/"
EVENTS_PATH = "/slack/events"
PLATFORM = "slack"
USER_TTL_S = 300.0  # how long a member's name and admin flag are trusted
SOCKET_CONNECT_S = 30.0
SEEN_EVENTS = 1000  # event ids remembered, so a redelivered event is not heard twice
OUTBOX_EVENT = "bottown_outbox"  # metadata event_type of a post carrying an outbox event

# Slack answers that mean the channel itself is gone or was left: provision it again, retry once.
_REPAIRABLE = ("channel_not_found", "is_archived", "not_in_channel")
_NETWORK_ERRORS = (aiohttp.ClientError, TimeoutError, OSError, SlackClientError)


# -- errors -------------------------------------------------------------------------------------


def _error_code(exc: SlackApiError) -> str:
    response = exc.response
    with contextlib.suppress(Exception):
        return str(response.get("error", ""))
    return ""


def _status(exc: SlackApiError) -> int:
    response = exc.response
    return int(getattr(response, "status_code", None) or getattr(response, "status", 0) or 0)


def _retry_after(exc: SlackApiError) -> float:
    headers = getattr(exc.response, "headers", None) or {}
    for key, value in headers.items():
        if str(key).lower() == "retry-after":
            with contextlib.suppress(ValueError):
                return max(0.0, float(value))
    return 1.0


def delivery_error(exc: SlackApiError) -> DeliveryError:
    status, code = _status(exc), _error_code(exc)
    if status == 429 or code == "ratelimited":
        return DeliveryError(f"Slack rate limit ({code})", retry_after=_retry_after(exc))
    if status >= 500 or code in ("internal_error", "fatal_error", "service_unavailable"):
        return DeliveryError(f"Slack server error {status} {code}".strip())
    return DeliveryError(f"Slack refused the message: {code or status}", permanent=True)


class ProvisionError(RuntimeError):
    """No channel could be found or made for a location."""


@contextlib.contextmanager
def _as_delivery_errors() -> Iterator[None]:
    try:
        yield
    except SlackApiError as exc:
        raise delivery_error(exc) from exc
    except _NETWORK_ERRORS as exc:
        raise DeliveryError(f"Slack could not be reached: {exc!r}") from exc
    except ProvisionError as exc:
        raise DeliveryError(str(exc), permanent=True) from exc


# -- the adapter --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    name: str
    is_admin: bool


class SlackAdapter:
    """The town in one Slack workspace (``adapters.core.base.Adapter``)."""

    name = PLATFORM
    max_chars = 3000  # Slack takes 40,000; a chat line this long is already a lot to read
    min_interval_s = 1.0  # Slack's guidance: about one message a second per channel

    def __init__(
        self,
        town: TownPort,
        store: Store,
        town_id: int,
        *,
        bot_token: str,
        app_token: str | None = None,
        signing_secret: str | None = None,
        mode: str = "socket",
        port: int = 3000,
        host: str = "127.0.0.1",
        api_url: str = SLACK_API,
    ) -> None:
        if mode not in ("socket", "http"):
            raise ValueError(f"Slack mode must be 'socket' or 'http', not {mode!r}")
        if mode == "socket" and not app_token:
            raise ValueError("Slack Socket Mode needs BOTTOWN_SLACK_APP_TOKEN (xapp-...)")
        if mode == "http" and not signing_secret:
            raise ValueError("Slack HTTP events need BOTTOWN_SLACK_SIGNING_SECRET")
        self._town, self._store, self._town_id = town, store, town_id
        self._mode, self._app_token = mode, app_token
        self._host, self._port = host, port
        # Inbound work and provisioning: connection and rate-limit retries inside the SDK.
        self.client = AsyncWebClient(
            token=bot_token,
            base_url=api_url,
            retry_handlers=[
                AsyncConnectionErrorRetryHandler(max_retry_count=1),
                AsyncRateLimitErrorRetryHandler(max_retry_count=2),
            ],
        )
        # Posting the outbox: no hidden retries; a 429 or 5xx goes to the pump, which waits.
        self._poster = AsyncWebClient(token=bot_token, base_url=api_url, retry_handlers=[])
        self.app = AsyncApp(
            client=self.client,
            signing_secret=signing_secret or None,
            request_verification_enabled=bool(signing_secret),  # always on in HTTP mode
            process_before_response=True,  # listeners only ack and hand off, so this is quick
            name="bottown",
        )
        self.app.event("message")(self._on_message)
        self.app.event("app_mention")(self._on_mention)
        self.app.command("/town")(self._on_command)
        self._channels: dict[str, str] = {}  # area -> channel id
        self._areas: dict[str, str] = {}  # channel id -> area
        self._members: dict[str, tuple[float, Member]] = {}
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        self._chains: dict[str, asyncio.Task[None]] = {}
        self._bot_user_id = ""
        self._team = ""
        self._socket: AsyncSocketModeHandler | None = None
        self._runner: web.AppRunner | None = None

    # -- life ---------------------------------------------------------------------------------

    async def start(self) -> None:
        auth = await self.client.auth_test()
        self._bot_user_id = str(auth.get("user_id") or "")
        self._team = str(auth.get("team") or "")
        await self.provision()
        if self._mode == "socket":
            await self._connect_socket()
        else:
            await self._serve_http()
        log.info("%s", self.status_line())

    async def stop(self) -> None:
        if self._socket is not None:
            await self._socket.close_async()  # type: ignore[no-untyped-call]
            self._socket = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5)
        for task in set(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def status_line(self) -> str:
        where = f"workspace {self._team}" if self._team else "not connected"
        channels = f"{len(self._channels)} location channels"
        if self._mode == "socket":
            return f"Slack: Socket Mode, {where}, {channels}"
        return f"Slack: HTTP events on {self._host}:{self._port}{EVENTS_PATH}, {where}, {channels}"

    @property
    def events_url(self) -> str:
        """Where the HTTP Events API is served (HTTP mode, after ``start``)."""
        return f"http://{self._host}:{self._port}{EVENTS_PATH}"

    async def idle(self) -> None:
        """Wait until the work handed off by listeners is done (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*set(self._tasks), return_exceptions=True)

    async def _connect_socket(self) -> None:
        assert self._app_token is not None
        # Asked here first so a bad app token fails the start (the SDK's connect would retry
        # forever); the SDK then connects to the URL we were given.
        opened = await self.client.apps_connections_open(app_token=self._app_token)
        handler = AsyncSocketModeHandler(self.app, self._app_token)
        handler.client.wss_uri = str(opened["url"])
        self._socket = handler
        try:
            await asyncio.wait_for(handler.connect_async(), SOCKET_CONNECT_S)  # type: ignore[no-untyped-call]
        except TimeoutError:
            await self.stop()
            raise RuntimeError("Slack Socket Mode did not connect; check the network") from None

    async def _serve_http(self) -> None:
        web_app = web.Application()
        web_app.router.add_post(EVENTS_PATH, self._http_request)
        self._runner = web.AppRunner(web_app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._host, self._port).start()
        self._port = int(self._runner.addresses[0][1])  # the real one when 0 was asked for

    async def _http_request(self, request: web.Request) -> web.Response:
        response = await self.app.async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(response)

    # -- channels -----------------------------------------------------------------------------

    async def provision(self) -> None:
        """One public channel per location: the stored one while it lives, else one found by
        name, else a new one; joined if needed, and remembered in the store."""
        listing = await self._list_channels()
        links = self._load_links()
        for area in self._town.areas():
            await self._provision_area(area, listing, links.get(area))

    async def _provision_area(
        self, area: str, listing: list[dict[str, Any]], linked: str | None
    ) -> str:
        known = next((c for c in listing if c.get("id") == linked), None) if linked else None
        if known is None or known.get("is_archived"):
            known = await self._find_or_create(area, listing)
        if not known.get("is_member"):
            await self.client.conversations_join(channel=known["id"])
            known["is_member"] = True
        channel_id = str(known["id"])
        self._save_link(area, channel_id, str(known.get("name", "")))
        self._channels[area] = channel_id
        self._areas[channel_id] = area
        return channel_id

    async def _describe(self, channel_id: str, area: str) -> None:
        """A new channel's purpose says what it is, and that its residents are AI; a channel
        is usable without it (the app may lack ``channels:manage``)."""
        purpose = channel_about(self._town.town_name, area)[:250]  # Slack's limit
        try:
            await self.client.conversations_setPurpose(channel=channel_id, purpose=purpose)
        except SlackApiError as exc:
            log.warning("Slack: could not set the purpose of %s (%s)", area, _error_code(exc))

    async def _find_or_create(self, area: str, listing: list[dict[str, Any]]) -> dict[str, Any]:
        base = channel_name(self._town.town_name, area)
        for n in range(1, 50):
            name = numbered(base, n)
            found = next((c for c in listing if c.get("name") == name), None)
            if found is not None:
                if not found.get("is_archived"):
                    return found
                continue  # an archived channel keeps its name; a bot cannot unarchive it
            try:
                created = await self.client.conversations_create(name=name, is_private=False)
            except SlackApiError as exc:
                if _error_code(exc) == "name_taken":  # a private channel, say: try the next
                    continue
                raise
            channel = dict(created["channel"])
            channel["is_member"] = True  # the creator is in it
            await self._describe(str(channel["id"]), area)
            listing.append(channel)
            log.info("Slack: created #%s", name)
            return channel
        raise ProvisionError(f"no free Slack channel name like {base!r}")

    async def _list_channels(self) -> list[dict[str, Any]]:
        channels: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = await self.client.conversations_list(
                types="public_channel", exclude_archived=False, limit=200, cursor=cursor
            )
            channels.extend(dict(c) for c in page.get("channels") or [])
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                return channels

    def _load_links(self) -> dict[str, str]:
        with self._store.session() as s:
            rows = s.exec(
                select(ChannelLink).where(
                    ChannelLink.town_id == self._town_id, ChannelLink.platform == PLATFORM
                )
            ).all()
            return {row.area: row.channel_id for row in rows}

    def _save_link(self, area: str, channel_id: str, name: str) -> None:
        with self._store.session() as s:
            row = s.exec(
                select(ChannelLink).where(
                    ChannelLink.town_id == self._town_id,
                    ChannelLink.platform == PLATFORM,
                    ChannelLink.area == area,
                )
            ).first()
            if row is None:
                row = ChannelLink(
                    town_id=self._town_id, platform=PLATFORM, area=area, channel_id=""
                )
            if row.channel_id != channel_id or row.extra.get("name") != name:
                row.channel_id, row.extra = channel_id, {"name": name}
                s.add(row)

    # -- outbound -----------------------------------------------------------------------------

    async def send(self, message: Outgoing) -> str:
        with _as_delivery_errors():
            try:
                return await self._post(message)
            except SlackApiError as exc:
                code = _error_code(exc)
                if code not in _REPAIRABLE:
                    raise
            log.warning(
                "Slack: the channel of %s answered %s; provisioning it again", message.area, code
            )
            await self._repair(message.area, code)
            return await self._post(message)

    async def _post(self, message: Outgoing) -> str:
        channel = self._channels.get(message.area)
        if channel is None:
            channel = await self._provision_area(message.area, await self._list_channels(), None)
        response = await self._poster.chat_postMessage(
            channel=channel,
            text=escape(message.text),
            username=(message.author or self._town.town_name)[:NAME_LIMIT],
            icon_emoji=icon_emoji(message.author, message.emoji),
            link_names=False,
            unfurl_links=False,
            unfurl_media=False,
            # Slack's message metadata: which outbox event this is, for anyone auditing the
            # channel (and the crash test, which counts each event's posts)
            metadata={"event_type": OUTBOX_EVENT, "event_payload": {"key": message.key}},
        )
        return str(response.get("ts", ""))

    async def _repair(self, area: str, code: str) -> None:
        channel = self._channels.get(area)
        if code == "not_in_channel" and channel:
            await self.client.conversations_join(channel=channel)
            return
        if channel:
            self._areas.pop(channel, None)
        await self._provision_area(area, await self._list_channels(), channel)

    # -- inbound ------------------------------------------------------------------------------

    async def _on_message(self, ack: AsyncAck, body: dict[str, Any], event: dict[str, Any]) -> None:
        await ack()
        channel, user = str(event.get("channel", "")), str(event.get("user") or "")
        area = self._areas.get(channel)
        if area is None or not self._from_member(event) or not self._first_time(body):
            return
        text = str(event.get("text") or "")
        if self._bot_user_id and text.lstrip().startswith(f"<@{self._bot_user_id}>"):
            return  # a command to the bot: the app_mention listener has it
        self._hand_off(lambda: self._visitor_says(area, user, text), chain=channel)

    async def _on_mention(self, ack: AsyncAck, body: dict[str, Any], event: dict[str, Any]) -> None:
        await ack()
        if not self._from_member(event, mention=True) or not self._first_time(body):
            return
        channel, user = str(event.get("channel", "")), str(event.get("user"))
        line = re.sub(r"^\s*<@[A-Z0-9]+(?:\|[^>]*)?>\s*", "", str(event.get("text") or ""))
        self._hand_off(lambda: self._mention_command(channel, user, unescape(line)))

    async def _on_command(
        self, ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond
    ) -> None:
        await ack()
        self._hand_off(lambda: self._slash_command(command, respond))

    def _from_member(self, event: dict[str, Any], *, mention: bool = False) -> bool:
        """A person's own plain message: not ours, not a bot's, not an edit or a join."""
        user = event.get("user")
        if not user or user == self._bot_user_id or event.get("bot_id") or event.get("app_id"):
            return False
        return mention or event.get("subtype") is None

    def _first_time(self, body: dict[str, Any]) -> bool:
        """False for an event Slack delivers again (a retry after a slow ack, a reconnect)."""
        event_id = str(body.get("event_id") or "")
        if not event_id:
            return True
        if event_id in self._seen:
            return False
        self._seen[event_id] = None
        while len(self._seen) > SEEN_EVENTS:
            self._seen.popitem(last=False)
        return True

    def _hand_off(self, work: Callable[[], Awaitable[None]], chain: str = "") -> None:
        """Run ``work`` after the ack, in the background; work on one ``chain`` (a channel's
        messages) runs in arrival order."""
        before = self._chains.get(chain) if chain else None

        async def run() -> None:
            if before is not None:
                await asyncio.wait([before])
            try:
                await work()
            except Exception:
                log.exception("Slack: handling an event failed")

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if chain:
            self._chains[chain] = task
            task.add_done_callback(lambda done: self._end_chain(chain, done))

    def _end_chain(self, chain: str, done: asyncio.Task[None]) -> None:
        if self._chains.get(chain) is done:
            del self._chains[chain]

    async def _visitor_says(self, area: str, user: str, text: str) -> None:
        member = await self._member(user)
        words = await self._readable(text)
        await self._town.visitor_says(PLATFORM, user, member.name, area, words)

    async def _mention_command(self, channel: str, user: str, line: str) -> None:
        reply = await self._town.command(await self._caller(user, channel), line)
        if reply.private:
            await self.client.chat_postEphemeral(
                channel=channel, user=user, text=escape(reply.text), link_names=False
            )
        else:
            await self.client.chat_postMessage(
                channel=channel,
                text=escape(reply.text),
                username=self._town.town_name[:NAME_LIMIT],
                icon_emoji=TOWN_ICON,
                link_names=False,
                unfurl_links=False,
            )

    async def _slash_command(self, command: dict[str, Any], respond: AsyncRespond) -> None:
        user, channel = str(command.get("user_id", "")), str(command.get("channel_id", ""))
        line = unescape(str(command.get("text") or ""))
        reply = await self._town.command(await self._caller(user, channel), line)
        await respond(
            text=escape(reply.text),
            response_type="ephemeral" if reply.private else "in_channel",
            unfurl_links=False,
        )

    async def _caller(self, user: str, channel: str) -> Caller:
        member = await self._member(user)
        return Caller(PLATFORM, user, member.name, member.is_admin, self._areas.get(channel))

    async def _member(self, user: str) -> Member:
        """A member's display name and whether they are a workspace admin or owner (cached)."""
        cached = self._members.get(user)
        now = time.monotonic()
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            info = (await self.client.users_info(user=user)).get("user") or {}
        except (SlackApiError, *_NETWORK_ERRORS) as exc:
            log.warning("Slack: users.info %s failed: %s", user, exc)
            return Member(user, False)
        profile = info.get("profile") or {}
        name = (
            profile.get("display_name")
            or profile.get("real_name")
            or info.get("real_name")
            or info.get("name")
            or user
        )
        admin = bool(info.get("is_admin") or info.get("is_owner") or info.get("is_primary_owner"))
        member = Member(str(name), admin)
        self._members[user] = (now + USER_TTL_S, member)
        return member

    async def _readable(self, text: str) -> str:
        """Slack's markup as a person reads it: ``<@U1>`` as ``@Name``, ``<#C1|cafe>`` as
        ``#cafe``, links as their label, entities unescaped."""
        names: dict[str, str] = {}
        for user in list(dict.fromkeys(re.findall(r"<@([A-Z0-9]+)(?:\|[^>]*)?>", text)))[:5]:
            names[user] = (await self._member(user)).name

        def plain(match: re.Match[str]) -> str:
            inside = match.group(1)
            target, _, label = inside.partition("|")
            if target.startswith("@"):
                return "@" + (label or names.get(target[1:], "someone"))
            if target.startswith("#"):
                return "#" + (label or self._areas.get(target[1:], "channel"))
            if target.startswith("!"):
                return label or "@" + target[1:].split("^")[0]
            return label or target

        return unescape(MARKUP.sub(plain, text))

"""Slack: the town in a workspace, one public channel per location, each resident posting under
its own name.

Inbound is a slack-bolt ``AsyncApp``: Socket Mode by default (the app-level token), or the HTTP
Events API served with aiohttp on ``host:port`` (Bolt checks every request's signature and its
5-minute replay window); or, for one of many workspaces, the app they share
(``adapters.slack.workspaces``: ``shared`` and the workspace's ``team_id``, its bot token from
the installation store). This module is that transport; the channels, the listeners and the
poster live beside it (``channels``, ``listeners``, ``inbound``, ``poster``).
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.core.links import ChannelLinks
from adapters.core.ports import Outgoing, TownPort
from adapters.slack.channels import LocationChannels
from adapters.slack.confirm import Confirmations
from adapters.slack.departures import Departures
from adapters.slack.inbound import PLATFORM, Inbound
from adapters.slack.listeners import listen
from adapters.slack.members import Members
from adapters.slack.poster import MAX_CHARS, MIN_INTERVAL_S, SlackPoster
from adapters.slack.text import escape
from adapters.slack.workspaces import EVENTS_PATH, SLACK_API, SlackWorkspaces, dispatched, retrying
from town.store.db import Store

log = logging.getLogger(__name__)

SOCKET_CONNECT_S = 30.0


class SlackAdapter:
    """The town in one Slack workspace (``adapters.core.ports.Adapter``), on an app of its own
    or on the one many workspaces share (``shared``)."""

    name = PLATFORM
    max_chars = MAX_CHARS
    min_interval_s = MIN_INTERVAL_S

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
        shared: SlackWorkspaces | None = None,
        team_id: str = "",
    ) -> None:
        self.shared, self.team_id = shared, team_id
        if shared is not None:
            mode, signing_secret = "http", shared.signing_secret
        if mode not in ("socket", "http"):
            raise ValueError(f"Slack mode must be 'socket' or 'http', not {mode!r}")
        if mode == "socket" and not app_token:
            raise ValueError("Slack Socket Mode needs BOTTOWN_SLACK_APP_TOKEN (xapp-...)")
        if mode == "http" and not signing_secret:
            raise ValueError("Slack HTTP events need BOTTOWN_SLACK_SIGNING_SECRET")
        self._mode, self._app_token = mode, app_token
        self._host, self._port = host, port
        # Inbound work and provisioning: connection and rate-limit retries inside the SDK.
        self.client = AsyncWebClient(token=bot_token, base_url=api_url, **retrying())
        self.channels = LocationChannels(self.client, town, ChannelLinks(store, town_id, PLATFORM))
        self.poster = SlackPoster(self.channels, town, self.client, token=bot_token)
        self.inbound = Inbound(town, self.channels, Members(self.client), self.poster)
        self.departures = Departures(town, self.inbound.hand_off)
        self.confirmations = Confirmations(self.inbound.confirmed, escape)
        if shared is None:
            self.app = AsyncApp(
                client=self.client,
                signing_secret=signing_secret or None,
                request_verification_enabled=bool(signing_secret),  # always on in HTTP mode
                process_before_response=True,  # listeners only ack and hand off: quick
                name="bottown",
            )
            listen(self.app, lambda team: self)
        else:
            self.app = shared.app
        self._team = ""
        self._socket: AsyncSocketModeHandler | None = None
        self._runner: web.AppRunner | None = None

    async def typing(self, area: str, author: str) -> None:
        return None  # Slack shows no typing indicator for a bot: the reply itself arrives

    async def send(self, message: Outgoing) -> str:
        return await self.poster.send(message)

    async def start(self) -> None:
        auth = await self.client.auth_test()
        self.inbound.bot_user_id = str(auth.get("user_id") or "")
        self.inbound.bot_id = str(auth.get("bot_id") or "")
        self._team = str(auth.get("team") or "")
        await self.channels.provision()
        if self.shared is not None:
            self.shared.towns[self.team_id] = self
        elif self._mode == "socket":
            await self._connect_socket()
        else:
            await self._serve_http()
        log.info("%s", self.status_line())

    async def stop(self) -> None:
        if self.shared is not None and self.shared.towns.get(self.team_id) is self:
            del self.shared.towns[self.team_id]
        if self._socket is not None:
            await self._socket.close_async()  # type: ignore[no-untyped-call]
            self._socket = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.inbound.close()

    def status_line(self) -> str:
        where = f"workspace {self._team}" if self._team else "not connected"
        channels = f"{self.channels.count()} location channels"
        if self.poster.problem:
            channels += f"; posting PAUSED: {self.poster.problem}"
        if self.shared is not None:
            return f"Slack: {where} on the app of many workspaces, {channels}"
        if self._mode == "socket":
            return f"Slack: Socket Mode, {where}, {channels}"
        return f"Slack: HTTP events on {self._host}:{self._port}{EVENTS_PATH}, {where}, {channels}"

    @property
    def events_url(self) -> str:
        """Where the HTTP Events API is served (HTTP mode, after ``start``)."""
        return f"http://{self._host}:{self._port}{EVENTS_PATH}"

    async def idle(self) -> None:
        """Wait until the work handed off by listeners is done (tests, shutdown)."""
        await self.inbound.idle()

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
        return await dispatched(self.app, request)

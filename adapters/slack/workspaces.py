"""Many Slack workspaces on one app: bolt's ``AsyncApp`` in HTTP mode with its OAuth flow. A
workspace installs the app at ``/slack/install`` (Slack sends the installer back to
``/slack/oauth_redirect``, where bolt exchanges the code for the workspace's bot token); the
installations and the OAuth states live in our database through slack_sdk's async SQLAlchemy
stores (the tables ``slack_installations``, ``slack_bots``, ``slack_oauth_states``). Bolt finds
each request's bot token there; each workspace's town calls Slack with its own.

Each request goes to its workspace's town (``towns``, by team id; ``adapters.slack.listeners``);
``/town`` in a workspace with no town to ``desk``. An uninstall (``tokens_revoked``,
``app_uninstalled``) deletes the installation and tells ``on_team``; an install (again) tells it
too, so the bot layer resumes a paused town.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_bolt.oauth.async_callback_options import AsyncCallbackOptions, AsyncSuccessArgs
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_bolt.response import BoltResponse
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.oauth.installation_store.sqlalchemy import AsyncSQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import AsyncSQLAlchemyOAuthStateStore
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy import select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from adapters.core.ports import Caller, Reply
from adapters.slack.inbound import PLATFORM
from adapters.slack.listeners import Town, listen
from adapters.slack.members import Members
from adapters.slack.text import escape, unescape

log = logging.getLogger(__name__)

SLACK_API = "https://slack.com/api/"
AUTHORIZE_URL = "https://slack.com/oauth/v2/authorize"
EVENTS_PATH = "/slack/events"
INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"
# what the town does in a workspace (manifest.yaml's bot scopes)
SCOPES = (
    "app_mentions:read",
    "channels:history",
    "channels:join",
    "channels:manage",
    "channels:read",
    "chat:write",
    "chat:write.customize",
    "commands",
    "reactions:read",
    "users:read",
)
STATE_SECONDS = 600
# a workspace's install changed: (team id, installed); False: uninstalled
TeamChanged = Callable[[str, bool], Awaitable[None]]
# ``/town <line>`` in a workspace with no town: (team id, the caller, the line) -> the answer
Desk = Callable[[str, Caller, str], Awaitable[Reply]]


def retrying() -> dict[str, Any]:
    """The retries of every Slack client here: a lost connection once, a rate limit twice."""
    return {
        "retry_handlers": [
            AsyncConnectionErrorRetryHandler(max_retry_count=1),
            AsyncRateLimitErrorRetryHandler(max_retry_count=2),
        ]
    }


def async_url(url: str) -> str:
    """Our database's URL for SQLAlchemy's asyncio engine: SQLite through aiosqlite, PostgreSQL
    through psycopg (async as it is)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return parsed.set(drivername="sqlite+aiosqlite").render_as_string(hide_password=False)
    if parsed.get_backend_name() == "postgresql":
        return parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
    return url


async def dispatched(app: AsyncApp, request: web.Request) -> web.Response:
    """An events, command or action request, through bolt (its signature checked)."""
    if not request.headers.get("X-Slack-Request-Timestamp", "").isdigit():
        return web.Response(status=401, text="invalid request")  # Bolt would answer 500
    response = await app.async_dispatch(await to_bolt_request(request))
    return await to_aiohttp_response(response)


class SlackWorkspaces:
    """The one app every workspace installs; ``start`` serves it on ``host:port``."""

    def __init__(
        self,
        *,
        client_id: str,
        client_secret: str,
        signing_secret: str,
        database_url: str,
        redirect_uri: str | None = None,
        host: str = "127.0.0.1",
        port: int = 3000,
        api_url: str = SLACK_API,
        authorize_url: str = AUTHORIZE_URL,
    ) -> None:
        self.signing_secret, self.api_url = signing_secret, api_url
        self._host, self._port = host, port
        self.engine: AsyncEngine = create_async_engine(async_url(database_url))
        self.installations = AsyncSQLAlchemyInstallationStore(client_id, self.engine)
        self.states = AsyncSQLAlchemyOAuthStateStore(STATE_SECONDS, self.engine)
        self.client = AsyncWebClient(base_url=api_url, **retrying())
        self._flow_options = AsyncCallbackOptions(success=self._installed, failure=self._failed)
        self.app = AsyncApp(
            client=self.client,
            signing_secret=signing_secret,
            process_before_response=True,  # listeners only ack and hand off: quick
            name="bottown",
            oauth_settings=AsyncOAuthSettings(
                client_id=client_id,
                client_secret=client_secret,
                scopes=list(SCOPES),
                redirect_uri=redirect_uri,
                install_path=INSTALL_PATH,
                redirect_uri_path=REDIRECT_PATH,
                authorization_url=authorize_url,
                installation_store=self.installations,
                state_store=self.states,
                callback_options=self._flow_options,
            ),
        )
        self.towns: dict[str, Town] = {}  # team id -> its town's adapter
        self.desk: Desk | None = None
        self.on_team: TeamChanged | None = None
        listen(self.app, lambda team: self.towns.get(team or ""), self._desk)
        self.app.event("tokens_revoked")(self._tokens_revoked)
        self.app.event("app_uninstalled")(self._uninstalled)
        self._runner: web.AppRunner | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- life ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Make the stores' tables (if missing) and serve the app."""
        await self.installations.create_tables()  # type: ignore[no-untyped-call]
        await self.states.create_tables()  # type: ignore[no-untyped-call]
        web_app = web.Application()
        web_app.router.add_post(EVENTS_PATH, self._request)
        web_app.router.add_get(INSTALL_PATH, self._install_page)
        web_app.router.add_get(REDIRECT_PATH, self._redirected)
        runner = web.AppRunner(web_app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, self._host, self._port).start()
        self._port = int(runner.addresses[0][1])  # the real one when 0 was asked for
        self._runner = runner  # serving, on that port
        log.info("Slack: the app of many workspaces on %s", self.url(""))

    async def stop(self) -> None:
        for task in set(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.engine.dispose()

    @property
    def serving(self) -> bool:
        return self._runner is not None

    def url(self, path: str) -> str:
        return f"http://{self._host}:{self._port}{path}"

    @property
    def events_url(self) -> str:
        return self.url(EVENTS_PATH)

    @property
    def install_url(self) -> str:
        return self.url(INSTALL_PATH)

    # -- the installations ------------------------------------------------------------------

    async def bot_token(self, team_id: str) -> str | None:
        """The workspace's bot token, None when the app is not installed there."""
        bot = await self.installations.async_find_bot(enterprise_id=None, team_id=team_id)
        return bot.bot_token if bot is not None else None

    async def team_name(self, team_id: str) -> str:
        """The workspace's name as it installed the app (its id if unknown)."""
        found = await self.installations.async_find_installation(
            enterprise_id=None, team_id=team_id
        )
        return str(found.team_name or team_id) if found is not None else team_id

    async def installed(self) -> list[str]:
        """The team ids of the workspaces the app is installed in."""
        bots = self.installations.bots
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                select(bots.c.team_id).where(bots.c.client_id == self._client_id).distinct()
            )
            return sorted(str(r[0]) for r in rows if r[0])

    @property
    def _client_id(self) -> str:
        return self.installations.client_id

    # -- requests ----------------------------------------------------------------------------

    async def _request(self, request: web.Request) -> web.Response:
        return await dispatched(self.app, request)

    def _flow(self) -> AsyncOAuthFlow:
        assert self.app.oauth_flow is not None
        return self.app.oauth_flow

    async def _install_page(self, request: web.Request) -> web.Response:
        answer = await self._flow().handle_installation(await to_bolt_request(request))
        return await to_aiohttp_response(answer)

    async def _redirected(self, request: web.Request) -> web.Response:
        answer = await self._flow().handle_callback(await to_bolt_request(request))
        return await to_aiohttp_response(answer)

    async def _installed(self, args: AsyncSuccessArgs) -> BoltResponse:
        team = str(args.installation.team_id or "")
        log.info("Slack: installed in the workspace %s (%s)", args.installation.team_name, team)
        if self.on_team is not None and team:
            await self.on_team(team, True)
        return await args.default.success(args)

    async def _failed(self, args: Any) -> BoltResponse:
        log.warning("Slack: an install failed: %s", args.reason)
        response: BoltResponse = await args.default.failure(args)
        return response

    async def _desk(
        self, ack: AsyncAck, command: dict[str, Any], respond: Any, team_id: str
    ) -> None:
        """``/town`` in a workspace with no town: acked at once, answered privately once the
        desk has (founding a town takes longer than Slack's 3 seconds)."""
        await ack()
        if self.desk is not None:
            task = asyncio.create_task(self._answer_desk(self.desk, command, respond, team_id))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _answer_desk(
        self, desk: Desk, command: dict[str, Any], respond: Any, team_id: str
    ) -> None:
        user = str(command.get("user_id") or "")
        token = await self.bot_token(team_id)
        caller = Caller(PLATFORM, user, user)
        try:
            if token is not None:  # an admin or owner of the workspace is its admin
                member = await Members(self._client(token)).get(user)
                caller = Caller(PLATFORM, user, member.name, member.is_admin)
            reply = await desk(team_id, caller, unescape(str(command.get("text") or "")))
        except Exception:
            log.exception("Slack: /town in the workspace %s failed", team_id)
            reply = Reply("Something went wrong; it is in the bot's log.", True, False)
        await respond(text=escape(reply.text), response_type="ephemeral")

    def _client(self, token: str) -> AsyncWebClient:
        return AsyncWebClient(token=token, base_url=self.api_url, **retrying())

    async def idle(self) -> None:
        """Wait until the desk's answers in hand are sent (tests)."""
        while self._tasks:
            await asyncio.gather(*set(self._tasks), return_exceptions=True)

    async def _tokens_revoked(
        self, ack: AsyncAck, event: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        await ack()
        if (event.get("tokens") or {}).get("bot"):  # the bot's token: the town cannot post
            await self._gone(str(context.team_id or ""))

    async def _uninstalled(self, ack: AsyncAck, context: AsyncBoltContext) -> None:
        await ack()
        await self._gone(str(context.team_id or ""))

    async def _gone(self, team_id: str) -> None:
        await self.installations.async_delete_all(enterprise_id=None, team_id=team_id)
        log.info("Slack: uninstalled from the workspace %s", team_id)
        if self.on_team is not None and team_id:
            await self.on_team(team_id, False)

"""The local web adapter: the town in a browser on this machine, the embedded default.

``bottown run`` with no platform token serves one page (``adapters/web/static``, no build step,
nothing fetched from elsewhere) and a small JSON API on ``host:port`` (127.0.0.1 by default):

    GET  /                            the page
    GET  /api/town                    the town's name, its location channels, admin or not
    GET  /api/now                     who is where and the clock (the where and time commands)
    GET  /api/history?area=&limit=    a channel's recent messages; after a restart, from the store
    GET  /api/events                  server-sent events: new messages of every channel, and
                                      ``typing`` events (a resident composing a reply)
    GET  /api/map                     every area's box on the map and each resident where it is
    GET  /api/resident?name=          a resident's card (plan, memories, people; never private)
    GET  /api/replay                  the town's recorded run, for ``/replay`` (404 when none)
    POST /api/say                     {area, name, visitor_id, text}: a visitor writes in a channel
                                      (shown once stored: a muted member's words never are)
    POST /api/command                 {line, area, name, visitor_id}: a command; JSON reply
    GET  /healthz, /metrics           the process's health and Prometheus metrics, when given
                                      its watch (``adapters.web.watch``)

Outbound, ``send`` appends a message to its channel's history and pushes it to every open page.
Bound to a loopback address, the server answers only to loopback host names (no DNS rebinding)
and its callers are the town's owner, so admins; bound elsewhere, only the settings' allow-list
is. A POST whose ``Origin`` is another site's is refused, and so is one that is not JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path

from aiohttp import web

from adapters.core.ports import Caller, Outgoing, TownPort
from adapters.web.events import stream
from adapters.web.feed import KEEP, Feed
from adapters.web.history import History, as_shown
from adapters.web.pages import add_pages
from adapters.web.requests import (
    MAX_BODY,
    MAX_TEXT,
    BadInput,
    body_of,
    check_origin,
    is_loopback,
    listen,
    text_of,
    visitor_of,
)
from adapters.web.views import TownViews
from adapters.web.watch import ProcessWatch, add_watch_routes
from town.features.ratings.reactions import Reacted
from town.inputs.visit import EmptyWords, Visit
from town.store.db import Store
from town.text import NAME_LIMIT

log = logging.getLogger(__name__)

PAGE_CALLER = Caller("web", "page", "the page", automatic=True)  # where and time, not audited
FOLLOW_S = 1.0  # how often the page reads visitors' words said on other platforms


WEB_REACTIONS = ("👍", "👎")  # what the page offers under a resident's message


class WebAdapter:
    """The town in a browser: the page, its JSON API, and the outbox's messages as live feeds."""

    name = "web"
    max_chars = 4000
    min_interval_s = 0.0

    def __init__(
        self,
        town: TownPort,
        store: Store,
        town_id: int,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        data_dir: Path | None = None,
        watch: ProcessWatch | None = None,
    ) -> None:
        self.town = town  # the TownPort; ``port`` is the TCP port (0: any free one)
        self.host = host
        self.tcp_port = port
        self.owner_is_local = is_loopback(host)  # loopback: whoever can reach it owns the town
        self.feed = Feed()
        self.history = History(store, town_id, self.name)
        self.views = TownViews(town, data_dir)  # where the town's replay is
        self.watch = watch  # /healthz and /metrics
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._seen_line = 0  # the newest chat line whose visitor's words the feed has
        self._forgets = 0  # the town's forget generation the feed was read at
        self._catching_up = asyncio.Lock()
        self._following: asyncio.Task[None] | None = None

    # -- Adapter ----------------------------------------------------------------------------

    async def start(self) -> None:
        self._forgets = await asyncio.to_thread(self.town.forgets)
        self.feed = Feed()  # a new run: ids count from 1 again under a new epoch
        self._seen_line = self.history.load(self.feed, self.town.areas())
        self._runner, self.url = await listen(
            self.app(), self.host, self.tcp_port, "the web page", shutdown_timeout=2.0
        )
        self._following = asyncio.create_task(self._follow_visitors(), name="web-visitors")
        log.info("the town is open on %s", self.url)

    async def stop(self) -> None:
        if self._following is not None:
            self._following.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._following
            self._following = None
        self.feed.close_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def status_line(self) -> str:
        return f"Web: {self.url or 'not started'}"

    async def typing(self, area: str, author: str) -> None:
        try:
            emoji = await self.views.avatar(author)
            self.feed.typing(area, author, emoji)
        except Exception:  # best effort: the reply itself is what matters
            log.warning("web: could not show %s typing in %s", author, area, exc_info=True)

    async def send(self, message: Outgoing) -> str:
        await self._catch_up()  # the words an answer answers come first, wherever said
        shown = self.feed.add(
            message.area,
            message.author,
            message.text,
            message.emoji,
            clock=self.history.clock_of(message.key),
        )
        return f"web:{self.feed.epoch}.{shown.id}"

    # -- the app --------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard], client_max_size=MAX_BODY)
        add_pages(app)
        self.views.add_routes(app)
        app.router.add_get("/api/town", self._town)
        app.router.add_get("/api/now", self._now)
        app.router.add_get("/api/history", self._history)
        app.router.add_get("/api/events", self._events)
        app.router.add_post("/api/say", self._say)
        app.router.add_post("/api/command", self._command)
        app.router.add_post("/api/react", self._react)
        if self.watch is not None:
            add_watch_routes(app, self.watch)
        return app

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            check_origin(request, local_only=self.owner_is_local)
            return await handler(request)
        except BadInput as exc:
            return web.json_response({"error": str(exc)}, status=exc.status)
        except web.HTTPException as exc:
            if not request.path.startswith("/api/"):
                raise
            return web.json_response({"error": exc.reason}, status=exc.status)
        except Exception as exc:  # the town failed (an LLM down, a database error): not the input
            log.exception("web: %s %s failed", request.method, request.path)
            return web.json_response(
                {"error": f"the town could not do that ({type(exc).__name__}); try again"},
                status=503,
            )

    async def _town(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "name": self.town.town_name,
                "areas": self.town.areas(),
                "admin": self.owner_is_local,
                "max_text": MAX_TEXT,
                "max_name": NAME_LIMIT,
                "brain": asdict(self.town.thinking()),
                "live": True,
                "replay": self.views.replay_path() is not None,
            }
        )

    async def _now(self, request: web.Request) -> web.Response:
        where = await self.town.command(PAGE_CALLER, "where")
        clock = await self.town.command(PAGE_CALLER, "time")
        brain = asdict(self.town.thinking())  # (the LLM's budget may run out meanwhile)
        return web.json_response({"where": where.text, "time": clock.text, "brain": brain})

    async def _history(self, request: web.Request) -> web.Response:
        area = self._area(request.query.get("area"))
        raw = request.query.get("limit", "100")
        if not raw.isdigit() or not 1 <= int(raw) <= KEEP:
            raise BadInput(400, f"limit must be a whole number from 1 to {KEEP}")
        await self._catch_up()  # as the store is now: nothing of a member forgotten anywhere
        messages = [asdict(m) for m in self.feed.recent(area, int(raw))]
        return web.json_response({"area": area, "epoch": self.feed.epoch, "messages": messages})

    async def _events(self, request: web.Request) -> web.StreamResponse:
        return await stream(request, self.feed)

    async def _say(self, request: web.Request) -> web.Response:
        data = await body_of(request)
        area = self._area(data.get("area"))
        visitor, name = visitor_of(data, required_name=True)
        text = text_of(data, "text")
        # the town's rate limit keys on the visitor id and the connection (ids are the page's)
        peer = request.remote or ""
        try:  # the words and the name made plain, once
            visit = Visit.of(area, name, text, self.name, visitor, connection=peer)
            await self.town.visitor_says(visit)
        except EmptyWords as exc:  # nothing left once cleaned: refused, nothing shown or kept
            raise BadInput(400, str(exc)) from None
        # the words as the store keeps them (their chat line), before any answer, like words
        # said elsewhere: a muted member's words are kept nowhere else, so shown to nobody
        await self._catch_up()
        return web.json_response({"ok": True})

    async def _command(self, request: web.Request) -> web.Response:
        data = await body_of(request)
        line = text_of(data, "line")
        area = self._area(data["area"]) if data.get("area") not in (None, "") else None
        visitor, name = visitor_of(data, required_name=False)
        caller = Caller("web", visitor, name, self.owner_is_local, area)
        reply = await self.town.command(caller, line)
        published = not reply.private and area is not None
        if published and area is not None:  # a public answer is the channel's, like elsewhere
            self.feed.add(area, "", reply.text)
        return web.json_response(
            {"text": reply.text, "private": reply.private, "ok": reply.ok, "published": published}
        )

    async def _react(self, request: web.Request) -> web.Response:
        """A 👍 or 👎 on a resident's message (``removed``: taken back)."""
        data = await body_of(request)
        visitor, name = visitor_of(data, required_name=False)
        emoji, shown, removed = data.get("emoji"), data.get("id"), data.get("removed", False)
        if emoji not in WEB_REACTIONS:
            raise BadInput(400, f"emoji must be one of {' '.join(WEB_REACTIONS)}")
        if not isinstance(shown, int) or isinstance(shown, bool) or shown < 1:
            raise BadInput(400, "id must be the number of a message on the page")
        if not isinstance(removed, bool):
            raise BadInput(400, "removed must be true or false")
        if data.get("epoch") != self.feed.epoch:
            raise BadInput(409, "the town restarted since this page loaded: reload it to rate")
        message_id = f"web:{self.feed.epoch}.{shown}"
        kept = await self.town.reacted(
            Reacted("web", visitor, name, message_id, emoji, added=not removed)
        )
        return web.json_response({"ok": True, "kept": kept})

    # -- visitors on other platforms ----------------------------------------------------------

    async def _follow_visitors(self, every_s: float = FOLLOW_S) -> None:
        """While the page is served: visitors' words (said on the page, or on Discord, Slack,
        the shell, in any process) into the feed, every ``every_s`` seconds (and before each
        message sent)."""
        while True:
            await asyncio.sleep(every_s)
            try:
                await self._catch_up()
            except Exception:  # a busy or lost database: the next round tries again
                log.warning("web: could not read visitors' words from the store", exc_info=True)

    async def _catch_up(self) -> None:
        async with self._catching_up:
            forgets = await asyncio.to_thread(self.town.forgets)
            if forgets != self._forgets:  # a member forgotten, in this process or another
                await self._read_again()
                self._forgets = forgets
            lines = await asyncio.to_thread(self.history.visitors_after, self._seen_line)
            for line in lines:
                _, author, text, emoji, kind, clock, platform, _ = as_shown(line)
                self.feed.add(line.area, author, text, emoji, kind, clock, platform)
                self._seen_line = max(self._seen_line, line.id or 0)

    async def _read_again(self) -> None:
        """The feed read again from the store (where a forget left nothing of the member),
        under a new epoch: the open pages' feeds end, and each page, reconnecting, sees the
        new epoch, forgets what it showed and loads its channel again."""
        fresh = Feed()
        self._seen_line = await asyncio.to_thread(self.history.load, fresh, self.town.areas())
        self.feed, stale = fresh, self.feed
        stale.close_all()

    # -- helpers ----------------------------------------------------------------------------

    def _area(self, value: object) -> str:
        if not isinstance(value, str) or not value.strip():
            raise BadInput(400, "which channel? give the area")
        areas = self.town.areas()
        wanted = value.strip().casefold()
        for area in areas:
            if area.casefold() == wanted:
                return area
        raise BadInput(404, f"no channel {value[:100]!r}; channels: {', '.join(areas)}")

"""The local web adapter: the town in a browser on this machine, the embedded default.

``bottown run`` with no platform token serves one page (``adapters/web/static``, no build step,
nothing fetched from elsewhere) and a small JSON API on ``host:port`` (127.0.0.1 by default):

    GET  /                            the page
    GET  /api/town                    the town's name, its location channels, admin or not
    GET  /api/now                     who is where and the clock (the where and time commands)
    GET  /api/history?area=&limit=    a channel's recent messages; after a restart, from the store
    GET  /api/events                  server-sent events: new messages of every channel
    POST /api/say                     {area, name, visitor_id, text}: a visitor writes in a channel
    POST /api/command                 {line, area, name, visitor_id}: a command; JSON reply

Outbound, ``send`` appends a message to its channel's history and pushes it to every open page.
Bound to a loopback address, the server answers only to loopback host names (no DNS rebinding)
and its callers are the town's owner, so admins; bound elsewhere, only the settings' allow-list
is. A POST whose ``Origin`` is another site's is refused, and so is one that is not JSON.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

from aiohttp import web
from sqlmodel import col, select

from adapters.core.base import Caller, Outgoing, TownPort, render
from town.inputs.unit import clean_text
from town.outbox import audit
from town.store.db import Store
from town.store.models import AuditEntry, Delivery, OutboxEvent

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
PAGES = {
    "/": ("index.html", "text/html"),
    "/static/app.js": ("app.js", "text/javascript"),
    "/static/style.css": ("style.css", "text/css"),
}
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
MAX_TEXT = 10_000  # characters in a message or a command line (the town keeps fewer)
MAX_NAME = 80
KEEP = 200  # messages kept per channel
KEEPALIVE_S = 15.0  # an SSE comment this often, so dead pages are noticed
QUEUE = 1000  # messages waiting for one slow page before it is dropped (it reconnects)
VISITOR_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
PART = re.compile(r"#\d+$")  # a split message's part number after the outbox key
# a stored message: (when it was written, author, text, emoji, kind, game time "HH:MM")
_Stored = tuple[datetime, str, str, str, str, str]
PAGE_CALLER = Caller("web", "page", "the page", automatic=True)  # where and time, not audited


@dataclass(frozen=True)
class Shown:
    """One message in a channel as the page shows it."""

    id: int  # rises across all channels; also the SSE event id
    area: str
    author: str  # a resident or a visitor; "" for the town's narration
    text: str
    emoji: str = ""
    kind: str = "resident"  # resident, town (narration), visitor
    clock: str = ""  # game time "HH:MM" when known


@dataclass(eq=False)
class _Page:
    """One open page's live feed."""

    queue: asyncio.Queue[Shown | None] = field(default_factory=lambda: asyncio.Queue(QUEUE))


class Feed:
    """Each channel's recent messages and the pages listening for new ones.

    Message ids count up from 1 in each run of the server; ``epoch`` names the run, so a page
    that reconnects after a restart knows to reload instead of trusting the old numbers."""

    def __init__(self, keep: int = KEEP) -> None:
        self.epoch = uuid4().hex[:12]
        self._keep = keep
        self._history: dict[str, deque[Shown]] = {}
        self._pages: set[_Page] = set()
        self._last = 0

    def add(
        self, area: str, author: str, text: str, emoji: str = "", kind: str = "", clock: str = ""
    ) -> Shown:
        self._last += 1
        kind = kind or ("resident" if author else "town")
        shown = Shown(self._last, area, author, text, emoji, kind, clock)
        self._history.setdefault(area, deque(maxlen=self._keep)).append(shown)
        for page in list(self._pages):
            try:
                page.queue.put_nowait(shown)
            except asyncio.QueueFull:  # too slow: drop it; the browser reconnects and catches up
                self._close(page)
        return shown

    def recent(self, area: str, limit: int) -> list[Shown]:
        return list(self._history.get(area, ()))[-limit:]

    def since(self, last_id: int) -> list[Shown]:
        """What a page that saw up to ``last_id`` missed (as far as the history reaches)."""
        missed = [m for h in self._history.values() for m in h if m.id > last_id]
        return sorted(missed, key=lambda m: m.id)

    def listen(self) -> _Page:
        page = _Page()
        self._pages.add(page)
        return page

    def forget(self, page: _Page) -> None:
        self._pages.discard(page)

    def close_all(self) -> None:
        for page in list(self._pages):
            self._close(page)

    def _close(self, page: _Page) -> None:
        self._pages.discard(page)
        while not page.queue.empty():
            page.queue.get_nowait()
        page.queue.put_nowait(None)


class BadInput(Exception):
    """A request the API refuses, with the status and a message for the visitor."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


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
    ) -> None:
        self.town = town  # the TownPort; ``port`` is the TCP port (0: any free one)
        self.store = store
        self.town_id = town_id
        self.host = host
        self.tcp_port = port
        self.owner_is_local = is_loopback(host)  # loopback: whoever can reach it owns the town
        self.feed = Feed()
        self.url = ""
        self._runner: web.AppRunner | None = None

    # -- Adapter ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.feed = Feed()  # a new run: ids count from 1 again under a new epoch
        self._load_history()
        runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.tcp_port).start()
        except OSError as exc:
            await runner.cleanup()
            raise OSError(
                exc.errno, f"the web page cannot listen on {self.host}:{self.tcp_port}: {exc}"
            ) from exc
        self._runner = runner
        bound = runner.addresses[0][1]
        self.url = f"http://{url_host(self.host)}:{bound}"
        log.info("the town is open on %s", self.url)

    async def stop(self) -> None:
        self.feed.close_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def status_line(self) -> str:
        return f"Web: {self.url or 'not started'}"

    async def send(self, message: Outgoing) -> str:
        shown = self.feed.add(
            message.area, message.author, message.text, message.emoji, clock=self._clock(message)
        )
        return f"web:{self.feed.epoch}.{shown.id}"

    # -- the app --------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._guard], client_max_size=256 * 1024)
        for path in PAGES:
            app.router.add_get(path, self._static)
        app.router.add_get("/api/town", self._town)
        app.router.add_get("/api/now", self._now)
        app.router.add_get("/api/history", self._history)
        app.router.add_get("/api/events", self._events)
        app.router.add_post("/api/say", self._say)
        app.router.add_post("/api/command", self._command)
        return app

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            self._check_origin(request)
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

    def _check_origin(self, request: web.Request) -> None:
        host = request.headers.get("Host", "")  # not request.host: no DNS lookup when missing
        if self.owner_is_local and not is_loopback(host_of(host)):
            raise BadInput(403, "this town answers only on 127.0.0.1 or localhost")
        if request.method != "POST":
            return
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"{request.scheme}://{host}":
            raise BadInput(403, f"requests from {origin} are not accepted")
        if request.content_type != "application/json":
            raise BadInput(415, "send JSON (Content-Type: application/json)")

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name, kind = PAGES[request.path]
        headers = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
        if kind == "text/html":
            headers |= {"Content-Security-Policy": CSP, "Referrer-Policy": "no-referrer"}
        body = (STATIC / name).read_text(encoding="utf-8")
        return web.Response(text=body, content_type=kind, charset="utf-8", headers=headers)

    async def _town(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "name": self.town.town_name,
                "areas": self.town.areas(),
                "admin": self.owner_is_local,
                "max_text": MAX_TEXT,
                "brain": asdict(self.town.thinking()),
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
        messages = [asdict(m) for m in self.feed.recent(area, int(raw))]
        return web.json_response({"area": area, "epoch": self.feed.epoch, "messages": messages})

    async def _events(self, request: web.Request) -> web.StreamResponse:
        epoch, _, seen = request.headers.get("Last-Event-ID", "").partition(".")
        last = int(seen) if epoch == self.feed.epoch and seen.isdigit() else None
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        page = self.feed.listen()  # before the catch-up, so nothing falls in between
        try:
            hello = json.dumps({"epoch": self.feed.epoch})
            await response.write(f"retry: 2000\nevent: hello\ndata: {hello}\n\n".encode())
            missed = self.feed.since(last) if last is not None else []
            sent = missed[-1].id if missed else (last or 0)
            for message in missed:
                await response.write(sse(message, self.feed.epoch))
            while True:
                try:
                    item = await asyncio.wait_for(page.queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    await response.write(b": keep-alive\n\n")
                    continue
                if item is None:
                    break
                if item.id > sent:
                    await response.write(sse(item, self.feed.epoch))
        except ConnectionResetError:  # the page went away
            pass
        except Exception:  # the stream has begun: no error response can follow
            log.exception("web: a live feed failed")
        finally:
            self.feed.forget(page)
        return response

    async def _say(self, request: web.Request) -> web.Response:
        data = await body_of(request)
        area = self._area(data.get("area"))
        visitor, name = visitor_of(data, required_name=True)
        text = text_of(data, "text")
        shown = self.feed.add(area, name, clean_text(text), kind="visitor")
        await self.town.visitor_says("web", visitor, name, area, text)
        return web.json_response({"ok": True, "id": shown.id})

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

    def _load_history(self) -> None:
        """Each channel's newest messages as this platform showed them, from the store: what
        was delivered here, and what visitors wrote here (from the audit log)."""
        for area in self.town.areas():
            for shown in oldest_first(self._stored(area), self._visitors(area))[-KEEP:]:
                _, author, text, emoji, kind, clock = shown
                self.feed.add(area, author, text, emoji, kind, clock)

    def _stored(self, area: str) -> list[_Stored]:
        with self.store.session() as s:
            rows = s.exec(
                select(OutboxEvent)
                .join(Delivery, col(Delivery.outbox_id) == col(OutboxEvent.id))
                .where(
                    OutboxEvent.town_id == self.town_id,
                    OutboxEvent.channel == area,
                    Delivery.platform == self.name,
                    col(Delivery.status).in_(("sent", "digested")),
                )
                .order_by(col(OutboxEvent.id).desc())
                .limit(KEEP)
            ).all()
        found = []
        for row in reversed(rows):  # oldest first
            shown = render(row.kind, row.payload)
            if shown is not None:
                found.append((row.created_at, *shown, "", f"{row.game_time:%H:%M}"))
        return found

    def _visitors(self, area: str) -> list[_Stored]:
        with self.store.session() as s:
            rows = s.exec(
                select(AuditEntry)
                .where(
                    AuditEntry.town_id == self.town_id,
                    AuditEntry.channel == area,
                    AuditEntry.platform == self.name,
                    AuditEntry.direction == audit.IN,
                    col(AuditEntry.kind).in_(("say", audit.LIMITED)),
                )
                .order_by(col(AuditEntry.id).desc())
                .limit(KEEP)
            ).all()
        return [
            (r.wall_time, audit.name_of(r.who), r.text, "", "visitor", f"{r.game_time:%H:%M}")
            for r in reversed(rows)  # oldest first
        ]

    def _clock(self, message: Outgoing) -> str:
        """The game time of the outbox event behind a message ("" for a digest)."""
        key = PART.sub("", message.key)
        with self.store.session() as s:
            when = s.exec(
                select(OutboxEvent.game_time).where(OutboxEvent.idempotency_key == key)
            ).first()
        return f"{when:%H:%M}" if when is not None else ""


def oldest_first(*sources: list[_Stored]) -> list[_Stored]:
    """Messages from several stored sources, each already oldest first, merged by the time they
    were written; on a tie (a coarse clock, one tick's events) each source keeps its own order."""
    return sorted((shown for source in sources for shown in source), key=lambda shown: shown[0])


# -- request parsing ---------------------------------------------------------------------------


async def body_of(request: web.Request) -> dict[str, Any]:
    try:
        data = json.loads(await request.text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInput(400, f"the body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BadInput(400, "the body must be a JSON object")
    return data


def text_of(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise BadInput(400, f"{key} must be a string")
    if len(value) > MAX_TEXT:
        raise BadInput(413, f"{key} is {len(value)} characters long; at most {MAX_TEXT}")
    if not value.strip():
        raise BadInput(400, f"{key} is empty")
    return value.strip()


def visitor_of(data: dict[str, Any], *, required_name: bool) -> tuple[str, str]:
    visitor = data.get("visitor_id")
    if not isinstance(visitor, str) or not VISITOR_ID.fullmatch(visitor):
        raise BadInput(400, "visitor_id must be 1-64 letters, digits, '-' or '_'")
    name = data.get("name", "")
    if not isinstance(name, str):
        raise BadInput(400, "name must be a string")
    if len(name) > MAX_NAME:
        raise BadInput(400, f"a name has at most {MAX_NAME} characters")
    name = clean_text(name, MAX_NAME)
    if required_name and not name:
        raise BadInput(400, "name is empty: say who you are")
    return visitor, name or "a visitor"


def sse(message: Shown, epoch: str) -> bytes:
    data = json.dumps(asdict(message), ensure_ascii=False)  # one line: newlines are escaped
    return f"id: {epoch}.{message.id}\ndata: {data}\n\n".encode()


# -- addresses ----------------------------------------------------------------------------------


def host_of(netloc: str) -> str:
    """``[::1]:8765`` -> ``::1``; ``localhost:8765`` -> ``localhost``."""
    if netloc.startswith("["):
        return netloc[1:].split("]", 1)[0]
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


def is_loopback(host: str) -> bool:
    if host.casefold() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_host(host: str) -> str:
    """The host as a browser on this machine would write it."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host

"""``/healthz`` and ``/metrics`` over HTTP: on the web adapter's own port, and for a process
without it (a headless worker, a town on Discord or Slack only) on a port of their own
(``WatchServer``, ``BOTTOWN_METRICS_PORT``). What they say is the process's ``ProcessWatch``
(``bot.runtime.watch.Watch``); this module only serves it."""

from __future__ import annotations

import logging
from typing import Any, Protocol

from aiohttp import web

from adapters.web.requests import listen

log = logging.getLogger(__name__)


class ProcessWatch(Protocol):
    content_type: str  # of the metrics' text

    async def metrics(self) -> bytes: ...
    async def health(self) -> tuple[int, dict[str, Any]]: ...


def add_watch_routes(app: web.Application, watch: ProcessWatch) -> None:
    async def healthz(request: web.Request) -> web.Response:
        status, said = await watch.health()
        return web.json_response(said, status=status)

    async def metrics(request: web.Request) -> web.Response:
        response = web.Response(body=await watch.metrics())
        response.headers["Content-Type"] = watch.content_type
        return response

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)


class WatchServer:
    """``/healthz`` and ``/metrics`` alone on ``host:port`` (port 0: any free one)."""

    def __init__(self, watch: ProcessWatch, host: str, port: int) -> None:
        self.watch, self.host, self.port = watch, host, port
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        add_watch_routes(app, self.watch)
        self._runner, self.url = await listen(app, self.host, self.port, "/metrics")
        log.info("health and metrics on %s/healthz and /metrics", self.url)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

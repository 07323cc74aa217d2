"""A fake model that says its words with a marker: one side of a live A/B test in tests, so
simulated raters can tell its messages from the other model's (``bottown eval live --by
model``). Everything else is the fake server's (``standins.llm.server``)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from standins.llm.server import make_app
from standins.llm.state import STATE
from town.llm.port import I, OfflineBrain, R
from town.llm.schemas import UtterResult
from town.llm.tasks import Task


class MarkedBrain(OfflineBrain):
    """The offline brain's answers, its speech beginning with ``marker``."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker

    def answer(self, task: Task[I, R], inputs: I) -> R:
        result = super().answer(task, inputs)
        if isinstance(result, UtterResult):
            marked = UtterResult(text=f"{self.marker} {result.text}", end=result.end)
            return marked  # type: ignore[return-value]  # (R is UtterResult for utter)
        return result


def marked_app(marker: str, **options: Any) -> web.Application:
    """The fake server, its model's speech marked."""
    app = make_app(**options)
    app[STATE].brain = MarkedBrain(marker)
    return app


@contextlib.asynccontextmanager
async def running_marked(marker: str, **options: Any) -> AsyncIterator[str]:
    """Serve a marked fake on loopback while inside the block; yields its ``…/v1`` URL."""
    runner = web.AppRunner(marked_app(marker, **options), shutdown_timeout=1.0, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}/v1"
    finally:
        await runner.cleanup()

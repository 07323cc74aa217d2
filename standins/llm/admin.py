"""The fake LLM server's own routes under ``/_fake``, for tests and benches: queue faults,
read what it was asked, reset its counts."""

from __future__ import annotations

from aiohttp import web

from standins.llm import wire
from standins.llm.state import STATE, _body, _error, _json


async def queue_faults(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    body = await _body(request)
    queue = body.get("queue") if body else None
    if not isinstance(queue, list) or not all(f in wire.FAULTS for f in queue):
        return _error(
            400,
            f"Give {{'queue': [...]}} with faults among {list(wire.FAULTS)}.",
            "invalid_request_error",
        )
    state.queue.extend(str(f) for f in queue)
    return _json({"queued": list(state.queue)})


async def stats(request: web.Request) -> web.StreamResponse:
    return _json(request.app[STATE].stats())


async def reset(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    state.queue.clear()
    state.by_task.clear()
    state.by_fault.clear()
    state.last.clear()
    state.requests = state.embeddings = state.tokens = state.max_in_flight = state.max_serving = 0
    return _json({"reset": True})


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_post("/_fake/faults", queue_faults)
    router.add_get("/_fake/stats", stats)
    router.add_post("/_fake/reset", reset)

"""``GET /api/events``: new messages of every channel as server-sent events. A page that
reconnects in the same run (its ``Last-Event-ID`` names this feed's epoch) first gets what it
missed. A resident composing a reply is an event ``typing`` ({area, author, emoji}), never
caught up on."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import asdict

from aiohttp import web

from adapters.web.feed import Feed, Shown, Typing

log = logging.getLogger(__name__)

KEEPALIVE_S = 15.0  # an SSE comment this often, so dead pages are noticed


async def stream(request: web.Request, feed: Feed) -> web.StreamResponse:
    epoch, _, seen = request.headers.get("Last-Event-ID", "").partition(".")
    last = int(seen) if epoch == feed.epoch and seen.isdigit() else None
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    page = feed.listen()  # before the catch-up, so nothing falls in between
    try:
        hello = json.dumps({"epoch": feed.epoch})
        await response.write(f"retry: 2000\nevent: hello\ndata: {hello}\n\n".encode())
        missed = feed.since(last) if last is not None else []
        sent = missed[-1].id if missed else (last or 0)
        for message in missed:
            await response.write(sse(message, feed.epoch))
        while True:
            try:
                item = await asyncio.wait_for(page.queue.get(), KEEPALIVE_S)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            if item is None:
                break
            if isinstance(item, Typing):
                data = json.dumps(asdict(item), ensure_ascii=False)
                await response.write(f"event: typing\ndata: {data}\n\n".encode())
            elif item.id > sent:
                await response.write(sse(item, feed.epoch))
    except ConnectionResetError:  # the page went away
        pass
    except Exception:  # the stream has begun: no error response can follow
        log.exception("web: a live feed failed")
    finally:
        feed.forget(page)
    return response


def sse(message: Shown, epoch: str) -> bytes:
    data = json.dumps(asdict(message), ensure_ascii=False)  # one line: newlines are escaped
    return f"id: {epoch}.{message.id}\ndata: {data}\n\n".encode()

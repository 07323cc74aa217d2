"""What the web adapter's tests share: a reader of its server-sent events, and a town to watch."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp

from bot.runtime.run import TownRuntime
from town.views.places import whereabouts

HOBBS = "Hobbs Cafe"


async def someone_awake_at(runtime: TownRuntime, area: str, max_ticks: int = 18) -> str:
    """Tick the town until a resident is awake in ``area``; that resident's full name."""
    for _ in range(max_ticks):
        seen = await whereabouts(runtime.opened.engine)
        awake = [name for name, _, up in seen.by_area.get(area, []) if up]
        if awake:
            return awake[0]
        await runtime.opened.engine.tick()
    raise AssertionError(f"nobody woke up in {area} after {max_ticks} ticks")


class EventStream:
    """A reader of one server-sent events response."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.epoch = ""  # from the stream's first event, "hello"
        self.typing: list[dict[str, Any]] = []  # the "typing" events passed by, oldest first

    async def next(self, wait_s: float = 30.0) -> dict[str, Any]:
        data: dict[str, Any] | None = None
        event_id = kind = ""
        while True:
            line = await asyncio.wait_for(self.response.content.readline(), wait_s)
            if not line:
                raise AssertionError("the event stream ended")
            text = line.decode().rstrip("\n")
            if text.startswith("id: "):
                event_id = text[4:]
            elif text.startswith("event: "):
                kind = text[7:]
            elif text.startswith("data: "):
                data = json.loads(text[6:])
            elif text == "" and kind == "hello" and data is not None:
                self.epoch, data, kind = data["epoch"], None, ""
            elif text == "" and kind == "typing" and data is not None:
                self.typing.append(data)
                data, kind = None, ""
            elif text == "" and data is not None:
                assert event_id == f"{self.epoch}.{data['id']}"
                return data

    async def until(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            message = await self.next()
            if wanted(message):
                return message


async def events(http: aiohttp.ClientSession, url: str, **headers: str) -> EventStream:
    response = await http.get(f"{url}/api/events", headers=headers)
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    return EventStream(response)


def said(author: str) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m["author"] == author and m["kind"] == "resident"

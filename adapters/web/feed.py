"""Each web channel's recent messages, and the open pages listening for new ones."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from uuid import uuid4

KEEP = 200  # messages kept per channel
QUEUE = 1000  # messages waiting for one slow page before it is dropped (it reconnects)


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
    platform: str = ""  # a visitor's: where they wrote it (web, discord, slack, cli)


@dataclass(frozen=True)
class Typing:
    """A resident composing a reply in a channel: shown until their message comes (or a while)."""

    area: str
    author: str
    emoji: str = ""


@dataclass(eq=False)
class Page:
    """One open page's live feed."""

    queue: asyncio.Queue[Shown | Typing | None] = field(
        default_factory=lambda: asyncio.Queue(QUEUE)
    )


class Feed:
    """Each channel's recent messages and the pages listening for new ones.

    Message ids count up from 1 in each run of the server; ``epoch`` names the run, so a page
    that reconnects after a restart knows to reload instead of trusting the old numbers."""

    def __init__(self, keep: int = KEEP) -> None:
        self.epoch = uuid4().hex[:12]
        self._keep = keep
        self._history: dict[str, deque[Shown]] = {}
        self._pages: set[Page] = set()
        self._last = 0

    def add(
        self,
        area: str,
        author: str,
        text: str,
        emoji: str = "",
        kind: str = "",
        clock: str = "",
        platform: str = "",
    ) -> Shown:
        self._last += 1
        kind = kind or ("resident" if author else "town")
        shown = Shown(self._last, area, author, text, emoji, kind, clock, platform)
        self._history.setdefault(area, deque(maxlen=self._keep)).append(shown)
        self._push(shown)
        return shown

    def typing(self, area: str, author: str, emoji: str = "") -> None:
        """Tell the open pages that ``author`` is composing a message in ``area`` (not kept:
        a page that opens later never sees it)."""
        self._push(Typing(area, author, emoji))

    def _push(self, item: Shown | Typing) -> None:
        for page in list(self._pages):
            try:
                page.queue.put_nowait(item)
            except asyncio.QueueFull:  # too slow: drop it; the browser reconnects and catches up
                self._close(page)

    def recent(self, area: str, limit: int) -> list[Shown]:
        return list(self._history.get(area, ()))[-limit:]

    def since(self, last_id: int) -> list[Shown]:
        """What a page that saw up to ``last_id`` missed (as far as the history reaches)."""
        missed = [m for h in self._history.values() for m in h if m.id > last_id]
        return sorted(missed, key=lambda m: m.id)

    def listen(self) -> Page:
        page = Page()
        self._pages.add(page)
        return page

    def forget(self, page: Page) -> None:
        self._pages.discard(page)

    def close_all(self) -> None:
        for page in list(self._pages):
            self._close(page)

    def _close(self, page: Page) -> None:
        self._pages.discard(page)
        while not page.queue.empty():
            page.queue.get_nowait()
        page.queue.put_nowait(None)

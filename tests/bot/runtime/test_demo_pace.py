"""The demo's Tuesday at its pace (issue 48, "Done when"): a tick of 10 game minutes every 4 s,
the offline brain, the web's channel allowance, an injected clock and no wall time. During
Isabella's party Hobbs Cafe's channel shows the present: its newest posted line is within one
tick of the clock at every tick, the guests' party talk is posted while the party is on, and no
line older than a visitor's message is posted after it on its own."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import types
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from rich.console import Console
from sqlmodel import col, select

from adapters.core import delivery
from adapters.core.delivery import OutboxPump
from adapters.core.ports import Outgoing
from bot.runtime.demo import DEMO_TOWN, warm_demo
from bot.runtime.live import per_minute
from bot.runtime.run import TownRuntime
from bot.runtime.settings import Settings
from bot.runtime.towns import open_town
from tests.fakes.platform import FakePlatform
from town.inputs.visit import Visit
from town.memory.vectors import ChromaIndex
from town.outbox.keys import digest_holds, whole_key
from town.store.models import OutboxEvent

HOBBS = "Hobbs Cafe"
PACE_S = 4.0  # the demo's: a tick every 4 s
PARTY = (datetime(2023, 2, 14, 17, tzinfo=UTC), datetime(2023, 2, 14, 19, tzinfo=UTC))
VISITOR_AT = datetime(2023, 2, 14, 18, tzinfo=UTC)
HOST = "Isabella Rodriguez"
T = TypeVar("T")


class VirtualTime:
    """The pump's clock and sleep: a sleep waits, suspended, until the test moves the clock past
    its end (``run_to``), so channels wait side by side as they do live, and no wall time
    passes. The pump's database calls run inline (``inline``): between two moves of the clock
    every round has gone as far as it can."""

    def __init__(self) -> None:
        self.now = 1000.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._n = itertools.count()

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._n), woken))
        await woken

    async def run_to(self, until: float) -> None:
        """Move the clock to ``until``, waking each sleeper at its end, in order."""
        while True:
            await _settle()
            if not self._sleepers or self._sleepers[0][0] > until:
                break
            at, _, woken = heapq.heappop(self._sleepers)
            self.now = max(self.now, at)
            if not woken.done():
                woken.set_result(None)
        self.now = max(self.now, until)


async def rounds(
    pump: OutboxPump, clock: VirtualTime, news: asyncio.Event, stop: asyncio.Event
) -> None:
    """The pump's rounds as ``OutboxPump.run`` makes them on the clock: a round whenever there
    is news (a tick, a visitor's answer), which also ends a round's wait for narration's turn,
    and every 2 s anyway."""
    pump._news = news  # as ``run`` does
    while not stop.is_set():
        news.clear()
        await pump.deliver_pending()
        if news.is_set():
            continue
        heard = asyncio.ensure_future(news.wait())
        napping = asyncio.ensure_future(clock.sleep(2.0))
        await asyncio.wait({heard, napping}, return_when=asyncio.FIRST_COMPLETED)
        heard.cancel()
        napping.cancel()


async def _settle() -> None:
    for _ in range(200):
        await asyncio.sleep(0)


async def inline(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    return fn(*args, **kwargs)


def _outbox_ids(message: Outgoing) -> list[int]:
    held = digest_holds(message.key)
    return list(held) if held else []


async def test_hobbs_cafe_shows_the_party_as_it_happens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(
        data_dir=tmp_path,
        embedder="hash",
        brain="offline",
        demo_start="2023-02-14 16:30",
        tick_seconds=PACE_S,
    )
    await warm_demo(settings, Console(record=True))
    ChromaIndex.release_all()
    opened = await open_town(settings, DEMO_TOWN, persona="smallville")
    runtime = TownRuntime(opened, settings)
    clock = VirtualTime()
    monkeypatch.setattr(
        delivery, "asyncio", types.SimpleNamespace(**{**vars(asyncio), "to_thread": inline})
    )
    web = FakePlatform(name="web")
    pump = OutboxPump(
        runtime.store,
        runtime.town_id,
        web,
        channel_per_minute=per_minute(settings, "web"),
        tick_s=settings.tick_seconds,
        sleep=clock.sleep,
        clock=clock,
    )
    runtime.pumps.append(pump)
    stop = asyncio.Event()
    delivering = asyncio.create_task(rounds(pump, clock, runtime.wake, stop))
    # (a message, the town's clock when it was posted, the game times of what it shows)
    posted: list[tuple[Outgoing, datetime, list[datetime]]] = []
    visitor_replied = 0  # the outbox id of the first reply to the visitor
    visitor_at_message = 0  # messages posted before the visitor wrote
    behind: list[tuple[datetime, datetime]] = []
    try:
        await clock.run_to(clock.now + 60)
        web.sent.clear()
        while True:
            report = await runtime.tick()
            assert report is not None
            now = report.clock
            if now >= PARTY[1] + timedelta(minutes=30):
                break
            first = len(web.sent)
            ends = clock.now + PACE_S
            if now == VISITOR_AT:  # halfway to the next tick, a visitor writes
                await clock.run_to(clock.now + PACE_S / 2)
                visitor_at_message = len(web.sent)
                hello = Visit.of(HOBBS, "Alice", "Hi Isabella! How is the party going?", "web")
                await runtime.visitor_says(hello)
                replies = [m for m in web.sent[visitor_at_message:] if m.reply]
                assert replies, "Isabella answers the visitor"
                visitor_replied = min(pump_ids(runtime, replies))
            await clock.run_to(ends)  # the pump's rounds until the next tick
            for message in web.sent[first:]:
                posted.append((message, now, game_times(runtime, message)))
            at_hobbs = [p for p in posted if p[0].area == HOBBS]
            if PARTY[0] <= now < PARTY[1] and at_hobbs:
                newest = max(at_hobbs[-1][2])
                if now - newest > timedelta(minutes=10):
                    behind.append((now, newest))
    finally:
        stop.set()
        runtime.wake.set()
        while not delivering.done():  # its last round ends
            await clock.run_to(clock.now + 60)
        opened.services.close()
        ChromaIndex.release_all()
    during = [m for m, at, _ in posted if m.area == HOBBS and PARTY[0] <= at < PARTY[1]]
    assert behind == []  # the newest line posted is within one tick of the clock, every tick
    party_talk = [m for m in during if _party_talk(m)]
    assert len(party_talk) >= 10, [m.text for m in during]
    assert visitor_replied
    late = [
        m.text
        for m, _, _ in posted[visitor_at_message:]
        if m.author and not m.reply and min(pump_ids(runtime, [m])) < visitor_replied
    ]
    assert late == []  # nothing older than the visitor's message reads as an answer to it


def _party_talk(message: Outgoing) -> bool:
    """A guest's words of the party, or a scene line quoting them."""
    if message.author:
        return message.author != HOST and "party" in message.text.lower()
    first = message.text.splitlines()[0]
    return "talked here: “" in first and "party" in first.split("“", 1)[1].lower()


def pump_ids(runtime: TownRuntime, messages: list[Outgoing]) -> list[int]:
    """The outbox events these messages showed."""
    ids: list[int] = []
    with runtime.store.session() as s:
        for message in messages:
            held = _outbox_ids(message)
            if held:
                ids += held
                continue
            key = whole_key(message.key)
            row = s.exec(select(OutboxEvent.id).where(OutboxEvent.idempotency_key == key)).first()
            if row is not None:
                ids.append(row)
    return ids


def game_times(runtime: TownRuntime, message: Outgoing) -> list[datetime]:
    ids = pump_ids(runtime, [message])
    with runtime.store.session() as s:
        times = s.exec(select(OutboxEvent.game_time).where(col(OutboxEvent.id).in_(ids))).all()
    return [t if t.tzinfo else t.replace(tzinfo=UTC) for t in times]

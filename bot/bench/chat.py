"""``bottown bench chat``: what a visitor feels, with Smallville live against the fake LLM server.

Smallville is founded and brought to the morning on the offline brain (not measured); then it
runs live through the real gateway against ``bottown fake-llm`` (a fixed latency per call): a
tick every ``tick_seconds``, while simulated visitors write in several places at once, each
through the running town as an adapter's member would (``TownRuntime``'s answer posted at once,
the narration through an outbox pump to a stand-in platform). Each visitor keeps to a place
with residents awake and, in turn, addresses a resident there by name, greets the room, and
follows up.

Figures: p50/p95 seconds from a message to its first reply on the platform (addressed, and
not), the longest chain of LLM calls before a first reply, greetings left unanswered where a
resident was awake, replies that went out folded into a digest, and the share of ticks that
finished within their interval; ``slots`` (the calls the fake server answers at once,
``--slots``, 1 by default as a local server's), ``clock_behind_pct`` (the share of the ticks due
that a late tick skipped) and ``fallbacks_by_task`` (answers the offline brain gave, by task and
reason: ``pace`` for those given so the town keeps its pace).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from adapters.core.delivery import OutboxPump
from adapters.core.ports import Outgoing
from bot.bench.town import Pace, behind_pct, bench_gateway, found_bench_town, start_fake_llm
from bot.runtime.run import TownRuntime
from bot.runtime.settings import Settings
from bot.runtime.towns import OpenTown
from bot.runtime.wiring import Services
from town.inputs import visitor
from town.llm import urgency
from town.llm.client import open_client
from town.llm.depth import ChainCountingBrain
from town.llm.offline.brain import OfflineBrain
from town.llm.usage import UsageTally
from town.memory.embedding_queue import flush_queues
from town.memory.vectors import ChromaIndex
from town.outbox.events import TownEvent
from town.store.models import Delivery, OutboxEvent
from town.store.usage import StoredUsage
from town.tick.engine import Engine
from town.tick.state import ResidentState
from town.world.load import load_town
from town.world.places import World

MORNING_TICKS = 12  # offline ticks before the measure: residents up and about
KINDS = ("addressed", "greeting", "follow-up")
GREETINGS = ("Hello everyone!", "Hi there!", "Good morning, all!")
FOLLOW_UPS = ("What are you up to today?", "How long have you lived here?", "Any plans later?")


@dataclass
class Message:
    kind: str
    sent: float
    first_reply: float | None = None
    chain: int = 0
    awake_there: bool = False


@dataclass
class ChatBench:
    messages: list[Message] = field(default_factory=list)
    ticks: list[float] = field(default_factory=list)  # seconds each tick took
    tick_seconds: float = 10.0
    replies_in_digests: int = 0
    slots: int = 1
    skipped: int = 0  # ticks due while a tick still ran
    answers: dict[str, Any] = field(default_factory=dict)

    def _waits(self, addressed: bool) -> list[float]:
        return [
            m.first_reply - m.sent
            for m in self.messages
            if m.first_reply is not None and (m.kind == "addressed") == addressed
        ]

    def as_json(self) -> dict[str, Any]:
        def pct(values: list[float], q: int) -> float | None:
            if not values:
                return None
            if len(values) == 1:
                return round(values[0], 2)
            return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 2)

        addressed, other = self._waits(True), self._waits(False)
        on_time = sum(1 for took in self.ticks if took <= self.tick_seconds)
        return {
            "first_reply_p50_s_addressed": pct(addressed, 50),
            "first_reply_p95_s_addressed": pct(addressed, 95),
            "first_reply_p50_s_other": pct(other, 50),
            "first_reply_p95_s_other": pct(other, 95),
            "longest_chain_addressed": max(
                (m.chain for m in self.messages if m.kind == "addressed"), default=0
            ),
            "longest_chain_other": max(
                (m.chain for m in self.messages if m.kind != "addressed"), default=0
            ),
            "unanswered_greetings": sum(
                1
                for m in self.messages
                if m.kind == "greeting" and m.awake_there and m.first_reply is None
            ),
            "replies_in_digests": self.replies_in_digests,
            "ticks_on_time_pct": round(100 * on_time / len(self.ticks), 1) if self.ticks else None,
            "messages": len(self.messages),
            "ticks": len(self.ticks),
            "slots": self.slots,
            "clock_behind_pct": behind_pct(len(self.ticks), self.skipped),
            "fallbacks_by_task": self.answers.get("fallbacks_by_task", {}),
        }


@dataclass
class _Platform:
    """The stand-in platform: takes every post at once."""

    name: str = "bench"
    max_chars: int = 2000
    min_interval_s: float = 0.0
    sent: int = 0

    async def send(self, message: Outgoing) -> str:
        self.sent += 1
        return f"b{self.sent}"


def _awake_by_area(engine: Engine) -> dict[str, list[str]]:
    """Who is awake where, read without waiting for a tick."""
    with Session(engine.store.engine) as session:
        found: dict[str, list[str]] = {}
        for row in engine.residents(session).values():
            if ResidentState.of(row).awake:
                found.setdefault(World.area_of(row.location), []).append(row.name)
        return found


async def _visitor(
    runtime: TownRuntime, bench: ChatBench, n: int, places: int, until: float
) -> None:
    """One simulated visitor: a place of its own among the busiest, three kinds of message."""
    engine, rng = runtime.engine, random.Random(n)
    name = f"Visitor {n + 1}"
    await asyncio.sleep(rng.uniform(0, 4))
    turn = 0
    while time.perf_counter() < until:
        awake = _awake_by_area(engine)
        areas = sorted(awake, key=lambda a: (-len(awake[a]), a))[:places]
        if not areas:
            await asyncio.sleep(1)
            continue
        area = areas[n % len(areas)]
        kind = KINDS[turn % len(KINDS)]
        if kind == "addressed":
            text = f"Hi {rng.choice(awake[area]).split()[0]}, how is your day going?"
        elif kind == "greeting":
            text = rng.choice(GREETINGS)
        else:
            text = rng.choice(FOLLOW_UPS)
        message = Message(kind, time.perf_counter(), awake_there=bool(awake.get(area)))

        async def express(event: TownEvent, key: str, message: Message = message) -> dict[str, str]:
            posted = await runtime._express(event, key)
            if message.first_reply is None:
                message.first_reply = time.perf_counter()
            return posted

        with urgency.person_waiting(urgency.VISITOR):  # as the runtime's visitor_says
            result = await visitor.say(
                engine,
                area,
                name,
                text,
                platform="bench",
                user_id=f"v{n}",
                typing=runtime._typing,
                express=express,
            )
        message.chain = result.chain
        bench.messages.append(message)
        turn += 1
        await asyncio.sleep(rng.uniform(6, 12))


async def _ticks(runtime: TownRuntime, bench: ChatBench, until: float) -> None:
    """The town's ticks, one every ``tick_seconds`` as the live town's scheduler runs them (a
    late tick skips the runs due meanwhile)."""
    pace = Pace(bench.tick_seconds)
    while time.perf_counter() < until:
        began = time.perf_counter()
        await runtime.tick()
        took = time.perf_counter() - began
        bench.ticks.append(took)
        runtime.wake.set()
        await pace.next()
        bench.skipped = pace.skipped


def _replies_in_digests(services: Services, town_id: int) -> int:
    with services.store.session() as s:
        rows = s.exec(
            select(OutboxEvent)
            .join(Delivery, Delivery.outbox_id == OutboxEvent.id)  # type: ignore[arg-type]
            .where(OutboxEvent.town_id == town_id, Delivery.status == "digested")
        ).all()
        return sum(1 for row in rows if row.payload.get("reply_to"))


async def run_chat_bench(
    settings: Settings,
    latency_ms: float = 1000,
    visitors: int = 10,
    places: int = 5,
    minutes: float = 2,
    tick_seconds: float = 10.0,
    concurrency: int = 64,
    *,
    slots: int = 1,
) -> ChatBench:
    spec = load_town("smallville")
    bench = ChatBench(tick_seconds=tick_seconds, slots=slots)
    proc, url = start_fake_llm(latency_ms, slots)
    try:
        with tempfile.TemporaryDirectory(prefix="bottown-bench-") as tmp:
            founded = await found_bench_town(settings, spec, Path(tmp))
            local, services, town = founded.settings, founded.services, founded.town
            morning = Engine(services.store, spec, OfflineBrain(), services.stream, founded.id)
            for _ in range(MORNING_TICKS):
                await morning.tick()
            flush_queues(services.executor)
            client = open_client(url, "bench", max(30.0, latency_ms / 100))
            gateway = bench_gateway(client, UsageTally(), concurrency)
            if local.llm_pace == "keep":
                gateway.pace_s = tick_seconds
            engine = Engine(
                services.store, spec, ChainCountingBrain(gateway), services.stream, founded.id
            )
            opened = OpenTown(services, engine, StoredUsage(services.store, founded.id), town)
            runtime = TownRuntime(opened, local)
            pump = OutboxPump(services.store, founded.id, _Platform())
            runtime.pumps.append(pump)
            delivery = asyncio.create_task(pump.run(runtime.wake, poll_s=1.0))
            until = time.perf_counter() + minutes * 60
            await asyncio.gather(
                _ticks(runtime, bench, until),
                *(_visitor(runtime, bench, n, places, until) for n in range(visitors)),
            )
            await pump.deliver_pending()
            delivery.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await delivery
            bench.replies_in_digests = _replies_in_digests(services, founded.id)
            bench.answers = gateway.report.as_json()
            await client.close()
            services.close()
            ChromaIndex.release_all()
    finally:
        proc.terminate()
        proc.wait(10)
    return bench

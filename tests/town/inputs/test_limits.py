"""Budgets and limits: a visitor's message rate with one polite notice, the daily call budget
that switches a town to the offline brain, and a channel's output rate."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest
from sqlmodel import col, select

from adapters.core.delivery import OutboxPump
from adapters.core.ports import Caller
from adapters.core.text import SHOWN_KINDS, render
from bot.runtime.commands import Commands
from bot.runtime.run import TownRuntime
from bot.runtime.settings import load_settings
from bot.runtime.wiring import build_brain
from standins.llm.server import running
from tests.factories import (
    CAFE_PAIR,
    T0,
    TownFactory,
    at_cafe,
    make_engine,
    memories,
    open_runtime,
    town_with_events,
    until,
)
from tests.fakes.platform import FakePlatform
from tests.helpers import Composed, sample
from town.inputs import visitor
from town.inputs.limits import ChannelRate, TokenBucket, VisitorRateLimit
from town.inputs.visit import Visit
from town.llm.client import open_client
from town.llm.gateway import MODE_BUDGET_SPENT
from town.llm.tasks import EMOJI
from town.outbox.events import TownEvent, write_outbox
from town.store.db import Store
from town.store.models import AuditEntry, Delivery, OutboxEvent
from town.store.usage import DailyTokenBudget, StoredUsage

HOBBS = "Hobbs Cafe"


class FakeClock:
    """Monotonic seconds that only move when told to (or when the code under test sleeps)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


# -- a visitor's message rate -------------------------------------------------------------------


def test_the_visitor_bucket_allows_bursts_then_one_notice_a_window() -> None:
    clock = FakeClock()
    limit = VisitorRateLimit(3, clock=clock)
    verdicts = [limit.check("discord", "1") for _ in range(6)]
    assert [v.allowed for v in verdicts] == [True, True, True, False, False, False]
    assert [v.notify for v in verdicts] == [False, False, False, True, False, False]
    assert limit.check("discord", "2").allowed  # another visitor has an allowance of their own
    assert limit.check("slack", "1").allowed  # and the same id on another platform too
    clock.now += 20  # 3 a minute: one message back every 20 s
    assert limit.check("discord", "1").allowed
    again = limit.check("discord", "1")
    assert not again.allowed and not again.notify  # still the same notice window
    clock.now += 60
    assert limit.check("discord", "1").allowed  # the bucket refilled (3 at most)
    assert [limit.check("discord", "1").allowed for _ in range(3)] == [True, True, False]
    clock.now += 61
    assert all(limit.check("discord", "1").allowed for _ in range(3))
    refused = limit.check("discord", "1")
    assert not refused.allowed and refused.notify  # a new window, a new notice
    assert all(VisitorRateLimit(0, clock=clock).check("web", "x").allowed for _ in range(100))


def test_idle_visitors_are_forgotten() -> None:
    clock = FakeClock()
    limit = VisitorRateLimit(5, clock=clock)
    for n in range(limit.PRUNE_EVERY - 1):
        limit.check("web", f"v{n}")
    assert limit.tracked() == limit.PRUNE_EVERY - 1
    clock.now += 120
    limit.check("web", "late")  # the sweep: every allowance is whole again
    assert limit.tracked() == 1
    with pytest.raises(ValueError):
        TokenBucket(0, 1, 0)
    with pytest.raises(ValueError):
        VisitorRateLimit(-1)


async def test_over_the_rate_nobody_hears_it_and_one_notice_goes_out(store: Store) -> None:
    engine = await make_engine(store)
    await until(engine, at_cafe(store, *CAFE_PAIR))  # Isabella and Klaus are at the cafe
    clock = FakeClock()
    rate = VisitorRateLimit(2, clock=clock)
    said = [f"message number {n} about the pastries" for n in range(5)]
    results = [
        await visitor.say(
            engine, visitor.Visit.of(HOBBS, "Alice", text, platform="web", user_id="a1"), rate=rate
        )
        for text in said
    ]
    assert [r.limited for r in results] == [False, False, True, True, True]
    assert all(sorted(r.heard_by) == sorted(CAFE_PAIR) for r in results[:2])
    assert all(r.heard_by == [] and r.replies == [] for r in results[2:])
    with store.session() as s:
        notices = s.exec(select(OutboxEvent).where(OutboxEvent.kind == "notice")).all()
        audited = s.exec(select(AuditEntry).order_by(col(AuditEntry.id))).all()
    assert len(notices) == 1  # exactly one notice in the window
    (notice,) = notices
    assert notice.channel == HOBBS and notice.payload["for_platform"] == "web"
    assert notice.payload["text"].startswith("Alice: you are writing faster")
    limited = [a for a in audited if a.kind == "say:limited"]
    assert [a.text for a in limited] == said[2:]  # the excess is still in the audit log
    assert all(a.who == "Alice (web:a1)" and a.channel == HOBBS for a in limited)
    assert [a.kind for a in audited if a.direction == "out" and a.kind != "reply"] == ["notice"]
    clock.now += 61  # a new minute: heard again; a new burst earns a new notice
    again = [
        await visitor.say(
            engine,
            visitor.Visit.of(HOBBS, "Alice", "back again", platform="web", user_id="a1"),
            rate=rate,
        )
        for _ in range(3)
    ]
    assert [r.limited for r in again] == [False, False, True]
    with store.session() as s:
        assert len(s.exec(select(OutboxEvent).where(OutboxEvent.kind == "notice")).all()) == 2
    await engine.tick()  # what residents perceive next: only what they heard
    for name in CAFE_PAIR:
        remembered = " ".join(m.text for m in memories(store, name))
        assert said[0] in remembered and said[1] in remembered, name
        assert not any(text in remembered for text in said[2:]), name


@pytest.fixture
async def strict_runtime(tmp_path: Path) -> AsyncIterator[TownRuntime]:
    """A live town whose visitors may send two messages a minute."""
    settings = load_settings(
        data_dir=tmp_path / "data", embedder="hash", brain="offline", visitor_messages_per_minute=2
    )
    runtime = await open_runtime(settings)
    yield runtime
    runtime.opened.services.close()


async def test_every_platform_is_limited_and_the_notice_shows_only_on_its_own(
    strict_runtime: TownRuntime,
) -> None:
    runtime = strict_runtime
    for platform, user in (("discord", "111"), ("slack", "U9")):
        for n in range(4):
            await runtime.visitor_says(
                Visit.of(HOBBS, "Max", f"{platform} line {n}", platform, user)
            )
    with runtime.store.session() as s:
        kinds = [
            (a.platform, a.kind) for a in s.exec(select(AuditEntry)).all() if a.kind != "notice"
        ]
    for platform in ("discord", "slack"):
        assert [k for p, k in kinds if p == platform] == [
            "say",
            "say",
            "say:limited",
            "say:limited",
        ]
    discord, slack = FakePlatform(name="discord"), FakePlatform(name="slack")
    for platform in (discord, slack):
        await OutboxPump(runtime.store, runtime.town_id, platform).deliver_pending()
    # nobody is at the cafe this early: each visitor is told so once, then of the rate
    assert [m.text[:12] for m in discord.sent] == ["Max: nobody ", "Max: you are"]
    assert [m.text[:12] for m in slack.sent] == ["Max: nobody ", "Max: you are"]
    assert discord.sent[1].author == "" and "@" not in discord.sent[1].text
    with runtime.store.session() as s:
        shown = s.exec(select(Delivery.platform, Delivery.status)).all()
    assert (
        sorted(shown)
        == [("discord", "sent")] * 2
        + [("discord", "skipped")] * 2
        + [("slack", "sent")] * 2
        + [("slack", "skipped")] * 2
    )


def test_a_notice_is_rendered_as_the_towns_narration() -> None:
    assert "notice" in SHOWN_KINDS
    payload = {"resident": "", "text": "Max: please wait.", "to": "Max", "for_platform": "web"}
    assert render("notice", payload) == ("", "Max: please wait.", "")


# -- the daily call budget ----------------------------------------------------------------------


async def test_the_call_budget_switches_the_town_to_the_offline_brain(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    engine = await make_engine(store)
    day = [date(2026, 11, 21)]
    usage = StoredUsage(store, engine.town_id, today=lambda: day[0])
    budget = DailyTokenBudget(usage, 1_000_000, limit_calls=3)
    async with running() as url:
        client = open_client(url, "k", 5)
        gateway = Composed(client, "town-model", usage=usage, budget=budget)
        engine.brain, engine.llm = gateway.brain, gateway.handles
        commands = Commands(engine, usage, DailyTokenBudget(usage, 1_000_000))
        admin = Caller("web", "root", "Root", is_admin=True)
        assert (
            "Budget left: 1,000,000 tokens, 3 calls"
            in (await commands.handle(admin, "status")).text
        )
        with caplog.at_level(logging.WARNING, logger="town.llm"):
            for _ in range(5):
                await gateway.run(EMOJI, sample(EMOJI), resident="Isabella Rodriguez")
            usage.flush()
            for _ in range(3):  # the town goes on, offline, and asks the server nothing
                assert not (await engine.tick()).skipped
        stats_url = url.removesuffix("/v1") + "/_fake/stats"
        async with aiohttp.ClientSession() as http, http.get(stats_url) as response:
            assert (await response.json())["requests"] == 3
        assert gateway.mode == MODE_BUDGET_SPENT
        status = (await commands.handle(admin, "status")).text
        assert "LLM today: 3 calls" in status and "(offline (budget spent))" in status
        assert "Budget spent (3 of 3 calls today): the offline brain answers until 00:00 UTC" in (
            status
        )
        spent = [r.getMessage() for r in caplog.records if "budget spent" in r.getMessage()]
        assert spent == [
            "LLM daily budget spent (3 of 3 calls today): residents use the offline brain "
            "until 00:00 UTC"
        ]
        day[0] += timedelta(days=1)  # midnight UTC: a new day, a new allowance
        assert gateway.mode == "llm" and budget.calls_left() == 3
        await client.close()


def test_the_token_and_call_limits_are_both_kept(store: Store, town_factory: TownFactory) -> None:
    town_id = town_factory(clock=datetime(2023, 2, 13, tzinfo=UTC)).id
    ticks = [0.0]
    usage = StoredUsage(store, town_id, refresh_s=5, clock=lambda: ticks[0])
    both = DailyTokenBudget(usage, 500, limit_calls=10)
    usage.record("react", "Klaus", 2, 100, 100, False)
    assert both.left() == 300 and both.calls_left() == 8 and not both.exhausted()
    usage.record("react", "Klaus", 1, 200, 100, False)
    assert both.spent_reason() == "500 of 500 tokens today" and both.exhausted()
    assert DailyTokenBudget(usage, 0).describe() == "Budget: no daily limit"
    usage.flush()
    assert usage.calls_today() == 3  # read afresh after the flush, then kept 5 s
    other = StoredUsage(store, town_id)  # another process's calls on the same town ...
    other.record("utter", "Klaus", 9, 1, 1, False)
    other.flush()
    assert usage.calls_today() == 3  # ... show once the stored totals are read again
    ticks[0] += 5
    assert usage.calls_today() == 12 and both.spent_reason() == "12 of 10 calls today"


def test_the_settings_wire_both_limits_into_the_gateway(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path,
        llm_base_url="http://127.0.0.1:9/v1",
        daily_call_budget=250,
        daily_token_budget=40_000,
    )
    store = Store.open(f"sqlite:///{tmp_path / 'town.db'}")
    _brain, handles, _usage = build_brain(settings, store, 1)
    (gateway,) = handles.models
    assert gateway.budget is handles.budget and isinstance(handles.budget, DailyTokenBudget)
    assert (handles.budget.limit_calls, handles.budget.limit_tokens) == (250, 40_000)
    store.dispose()


# -- a channel's output rate --------------------------------------------------------------------


def test_the_channel_window_slides() -> None:
    clock = FakeClock()
    rate = ChannelRate(2, clock=clock)
    assert rate.room("Cafe") == 2 and rate.wait("Cafe") == 0
    rate.note("Cafe")
    clock.now += 10
    rate.note("Cafe")
    assert rate.room("Cafe") == 0 and rate.wait("Cafe") == pytest.approx(50)
    assert rate.room("Park") == 2  # each channel has its own window
    clock.now += 50
    assert rate.room("Cafe") == 1 and rate.wait("Cafe") == 0
    assert ChannelRate(0, clock=clock).room("Cafe") is None


async def test_a_burst_the_channel_cannot_post_in_time_folds_whole_and_in_order(
    store: Store,
) -> None:
    events = [("said", "Cafe", f"line {n}") for n in range(5)] + [("said", "Park", "over here")]
    town_id = town_with_events(store, events)
    clock, platform = FakeClock(), FakePlatform()
    pump = OutboxPump(
        store, town_id, platform, channel_per_minute=3, sleep=clock.sleep, clock=clock
    )
    assert await pump.deliver_pending() == 6
    assert [m.text for m in platform.sent if m.area == "Park"] == ["over here"]  # not held up
    # five lines where three a minute go: one scene line, the freshest quoted, all in order
    (scene,) = [m.text for m in platform.sent if m.area == "Cafe"]
    assert scene.startswith("09:00-09:04: Isabella talked here: “line 4”")
    assert scene.splitlines()[1:] == [f"09:0{n} Isabella: line {n}" for n in range(5)]
    with store.session() as s:
        statuses = sorted(d.status for d in s.exec(select(Delivery)).all())
    assert statuses == ["digested"] * 5 + ["sent"]  # (nothing lost: each line in the scene)


async def test_a_backlog_at_the_rate_folds_into_one_digest(store: Store) -> None:
    town_id = town_with_events(store, [("action", "Cafe", f"action {n}") for n in range(2)])
    clock, platform = FakeClock(), FakePlatform()
    pump = OutboxPump(
        store,
        town_id,
        platform,
        channel_per_minute=3,
        digest_after=8,
        sleep=clock.sleep,
        clock=clock,
    )
    assert await pump.deliver_pending() == 2  # narration's share of the minute is used up
    with store.session() as s:
        later = [TownEvent("action", "Cafe", T0, "Isabella", f"later {n}") for n in range(5)]
        write_outbox(s, town_id, "t2", later)
    assert await pump.deliver_pending() == 0  # waiting, its backlog more than the minute takes
    clock.now += 60
    assert await pump.deliver_pending() == 5
    digest = platform.sent[-1]  # a scene line: the freshest, then the rest, all in order
    assert len(platform.sent) == 3 and digest.text.startswith("09:00: later 4; 4 other things")
    lines = [line.split(" ", 1)[1] for line in digest.text.splitlines()[1:]]
    assert lines == [f"later {n}" for n in range(5)]


async def test_the_parts_of_a_long_digest_wait_for_the_rate(store: Store) -> None:
    long_lines = [("action", "Cafe", f"remark {n} " + "and so on " * 8) for n in range(10)]
    town_id = town_with_events(store, long_lines)
    clock, platform = FakeClock(), FakePlatform(max_chars=200)
    pump = OutboxPump(
        store, town_id, platform, channel_per_minute=2, sleep=clock.sleep, clock=clock
    )
    assert await pump.deliver_pending() == 10
    parts = len(platform.sent)
    assert parts > 4  # one digest, split into parts, posted in order
    assert clock.slept and sum(clock.slept) >= 60 * ((parts - 1) // 2) - 1
    texts = [m.text for m in platform.sent]
    body = "".join(texts).split("\n", 1)[1]  # the lines after the scene line's head, in order
    assert body.index("09:00 ☕ remark 0") < body.index("09:09 ☕ remark 9")
    assert "remark 9" in texts[-1]


async def test_ids_a_page_makes_up_share_their_connections_allowance(store: Store) -> None:
    engine = await make_engine(store)
    await until(engine, at_cafe(store, *CAFE_PAIR))
    rate = VisitorRateLimit(2, clock=FakeClock())

    async def limited(user_id: str, connection: str) -> bool:
        said = await visitor.say(
            engine,
            visitor.Visit.of(
                HOBBS, "Alice", "hi", platform="web", user_id=user_id, connection=connection
            ),
            rate=rate,
        )
        return said.limited

    assert [await limited(f"id{n}", "10.0.0.7") for n in range(4)] == [False, False, True, True]
    assert not await limited("id9", "10.0.0.8")  # another connection has its own allowance

"""The gateway against the fake server's faults, one for each "bad input" a real server gives:
the town keeps thinking, nothing over its cap comes back, the budget holds."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import openai
import pytest
from pydantic import BaseModel

from standins.llm.server import running
from tests.helpers import Composed, sample, settled
from town.llm import urgency
from town.llm.client import open_client
from town.llm.port import OfflineBrain
from town.llm.schemas import PASSAGE_CAP
from town.llm.tasks import DECOMPOSE, EMOJI, RATE_IMPORTANCE, TASKS, UTTER
from town.llm.usage import TokenBudget, UsageTally

BY_NAME = {task.name: task for task in TASKS}

Rig = tuple[Composed, UsageTally, str]


async def admin(url: str, path: str, payload: Any = None) -> Any:
    root = url.removesuffix("/v1")
    async with aiohttp.ClientSession() as http:
        if payload is None:
            async with http.get(root + path) as response:
                return await response.json()
        async with http.post(root + path, json=payload) as response:
            return await response.json()


async def faults(url: str, *kinds: str) -> None:
    await admin(url, "/_fake/faults", {"queue": list(kinds)})


async def requests(url: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = (await admin(url, "/_fake/stats"))["last_requests"]
    return found


@pytest.fixture
async def rig_factory() -> AsyncIterator[Callable[..., Rig]]:
    clients: list[openai.AsyncOpenAI] = []

    def build(url: str, *, timeout: float = 5.0, max_retries: int = 1, **kw: Any) -> Rig:
        client = open_client(url, "key", timeout, max_retries)
        clients.append(client)
        tally = UsageTally()
        kw["slots"] = kw["ceiling"] = kw.pop("concurrency", 8)
        return Composed(client, "m", usage=tally, **kw), tally, url

    yield build
    for client in clients:
        await client.close()


@pytest.fixture
async def rig(rig_factory: Callable[..., Rig]) -> AsyncIterator[Rig]:
    async with running() as url:
        yield rig_factory(url)


def texts(value: Any) -> list[str]:
    if isinstance(value, BaseModel):
        return texts(value.model_dump())
    if isinstance(value, dict):
        return [t for v in value.values() for t in texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in texts(v)]
    return [value] if isinstance(value, str) else []


async def test_a_500_naming_the_response_format_switches_to_json_object_with_the_schema(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    gateway, tally, url = rig
    await faults(url, "reject_json_schema_500")  # (final: the client does not retry it)
    with caplog.at_level(logging.WARNING, logger="town.llm"):
        for _ in range(2):
            assert (await gateway.run(EMOJI, sample(EMOJI))).emoji == "☕🍽️🧁"
    assert gateway.response_format_kind == "json_object"
    sent = await requests(url)
    assert [r["response_format"]["type"] for r in sent] == ["json_schema"] + ["json_object"] * 2
    assert sent[-1]["response_format"]["schema"] == EMOJI.schema_for(sample(EMOJI))
    [said] = [r.getMessage() for r in caplog.records]
    assert "HTTP 500" in said and "using json_object mode from now on" in said
    assert tally.total.fallbacks == 0


async def test_replies_that_ignore_the_format_move_on_to_the_next_mode(rig: Rig) -> None:
    gateway, tally, url = rig
    await faults(url, "no_json", "no_json", "no_json")
    for _ in range(2):  # the first: no JSON twice; the second: no JSON, then a good repair
        await gateway.run(EMOJI, sample(EMOJI))
    assert gateway.response_format_kind == "json_object"
    assert [r["response_format"]["type"] for r in await requests(url)][-1] == "json_object"
    assert tally.total.fallbacks == 1


@pytest.mark.parametrize("fault", ["prose", "wrong_types", "out_of_range", "control_chars"])
async def test_mendable_replies_are_used_without_a_repair(rig: Rig, fault: str) -> None:
    gateway, tally, url = rig
    inputs = sample(RATE_IMPORTANCE)
    await faults(url, fault)
    result = await gateway.run(RATE_IMPORTANCE, inputs)
    assert len(result.scores) == len(inputs.observations)
    assert all(1 <= s <= 10 for s in result.scores)
    if fault != "out_of_range":
        assert result == OfflineBrain().answer(RATE_IMPORTANCE, inputs)
    assert (tally.total.calls, tally.total.fallbacks) == (1, 0)


@pytest.mark.parametrize("name", sorted(BY_NAME))
async def test_huge_strings_never_come_back_uncapped(rig: Rig, name: str) -> None:
    gateway, tally, url = rig
    task = BY_NAME[name]
    await faults(url, "huge")
    result = await gateway.run(task, sample(task))
    assert all(len(t) <= PASSAGE_CAP for t in texts(result)), name
    assert tally.total.fallbacks == 0


async def test_truncated_json_is_repaired(rig: Rig) -> None:
    gateway, tally, url = rig
    await faults(url, "truncated")
    assert (await gateway.run(BY_NAME["plan_day"], sample(BY_NAME["plan_day"]))).chunks
    assert (tally.total.calls, tally.total.fallbacks) == (2, 0)
    await faults(url, "truncated")  # speech cut short is still speech: no repair
    assert (await gateway.run(UTTER, sample(UTTER))).text
    assert (tally.total.calls, tally.total.fallbacks) == (3, 0)


async def test_an_empty_choice_list_falls_back_with_its_reason(rig: Rig) -> None:
    gateway, _, url = rig
    await faults(url, "empty_choices")
    assert await gateway.run(EMOJI, sample(EMOJI)) == OfflineBrain().answer(EMOJI, sample(EMOJI))
    assert gateway.report.as_json()["fallbacks_by_task"] == {"emoji": {"unparseable": 1}}


async def test_server_errors_fall_back_with_the_status_as_reason(rig: Rig) -> None:
    gateway, _, url = rig
    await faults(url, "500", "500")
    await gateway.run(EMOJI, sample(EMOJI))
    assert gateway.report.as_json()["fallbacks_by_task"] == {"emoji": {"HTTP 500": 1}}


async def test_time_outs_slow_down_instead_of_falling_back(
    rig_factory: Callable[..., Rig],
) -> None:
    async with running(hang_s=10) as url:
        gateway, tally, _ = rig_factory(url, timeout=1.0, concurrency=4)
        await faults(url, "hang", "hang")
        assert (await gateway.run(EMOJI, sample(EMOJI))).emoji == "☕🍽️🧁"
        assert tally.total.fallbacks == 0 and gateway.pacer.timeouts == 1


async def test_calls_together_never_pass_the_budget_by_more_than_one_call(
    rig_factory: Callable[..., Rig],
) -> None:
    async with running() as url:
        box: list[UsageTally] = []
        limit = 4000
        budget = TokenBudget(limit, lambda: box[0].total_tokens)
        gateway, tally, _ = rig_factory(url, budget=budget, concurrency=8)
        box.append(tally)
        inputs = sample(UTTER)
        await asyncio.gather(*(gateway.run(UTTER, inputs) for _ in range(30)))
        one_call = max(1, tally.total_tokens // max(1, tally.total.calls))
        assert 0 < tally.total.calls < 30
        assert tally.total_tokens <= limit + one_call
        assert gateway.report.as_json()["fallbacks_by_task"]["utter"]["budget"] > 0


async def test_a_hung_server_never_stalls_the_town(
    rig_factory: Callable[..., Rig], caplog: pytest.LogCaptureFixture
) -> None:
    async with running(hang_s=10) as url:
        gateway, tally, _ = rig_factory(url, timeout=0.5, max_retries=0, concurrency=4)
        await faults(url, *["hang"] * 10)
        with caplog.at_level(logging.WARNING, logger="town.llm"):
            for _ in range(3):
                assert (await gateway.run(EMOJI, sample(EMOJI))).emoji == "☕🍽️🧁"
        stats = await admin(url, "/_fake/stats")
        assert stats["requests"] == 2  # two rounds for the first call, then the server rests
        assert tally.total.fallbacks == 3
        assert gateway.report.as_json()["fallbacks_by_task"] == {"emoji": {"timeout": 3}}
        said = [r.getMessage() for r in caplog.records if "time out" in r.getMessage()]
        assert len(said) == 1 and "BOTTOWN_LLM_TIMEOUT_S" in said[0]


async def test_a_context_window_too_small_is_said_once_with_the_fix(
    caplog: pytest.LogCaptureFixture, rig_factory: Callable[..., Rig]
) -> None:
    from aiohttp import web

    async def full(request: web.Request) -> web.Response:
        message = "Requested tokens (2300) exceed context window of 2048"
        return web.json_response({"error": {"message": message}}, status=400)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", full)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        gateway, _, _ = rig_factory(f"http://{host}:{port}/v1")
        with caplog.at_level(logging.WARNING, logger="town.llm"):
            for _ in range(2):
                await gateway.run(EMOJI, sample(EMOJI))
    finally:
        await runner.cleanup()
    said = [r.getMessage() for r in caplog.records if "too small" in r.getMessage()]
    assert len(said) == 1 and "--n_ctx 4096" in said[0]
    assert gateway.report.as_json()["fallbacks_by_task"] == {"emoji": {"context full": 2}}


async def test_a_server_that_ignores_max_tokens_passes_the_budget_by_one_call_at_most(
    rig_factory: Callable[..., Rig], caplog: pytest.LogCaptureFixture
) -> None:
    async with running(overrun_tokens=12_513) as url:
        box: list[UsageTally] = []
        limit = 6_000
        budget = TokenBudget(limit, lambda: box[0].total_tokens)
        gateway, tally, _ = rig_factory(url, budget=budget, concurrency=17)
        box.append(tally)
        inputs = sample(UTTER)
        cap = UTTER.max_tokens
        with caplog.at_level(logging.WARNING, logger="town.llm"):
            answers = await asyncio.gather(*(gateway.run(UTTER, inputs) for _ in range(40)))
        assert all(a.text for a in answers)
        one_call = max(tally.total.prompt_tokens // max(1, tally.total.calls), 1) + cap
        assert 0 < tally.total.calls < 40
        assert tally.total_tokens <= limit + one_call
        said = [r.getMessage() for r in caplog.records if "ignores max_tokens" in r.getMessage()]
        assert len(said) == 1


async def test_against_a_one_slot_server_a_visitor_s_reply_goes_ahead_of_the_town_s_calls(
    rig_factory: Callable[..., Rig],
) -> None:
    async with running(latency_ms=100, slots=1) as url:
        gateway, _, _ = rig_factory(url, concurrency=8)
        await gateway.run(EMOJI, sample(EMOJI))  # connected, and one call's time measured
        await asyncio.gather(*(gateway.run(EMOJI, sample(EMOJI)) for _ in range(8)))
        assert gateway.pacer.slots == 1 and gateway.pacer.said_by == "server"  # its /props
        done: list[str] = []

        async def think(name: str, task: Any, urgent: bool = False) -> None:
            if urgent:
                with urgency.person_waiting(urgency.VISITOR):
                    await gateway.run(task, sample(task))
            else:
                await gateway.run(task, sample(task))
            done.append(name)

        town = [asyncio.create_task(think(f"rating {n}", RATE_IMPORTANCE)) for n in range(5)]
        await settled(lambda: gateway.pacer.waiting == 4)
        await think("visitor", UTTER, urgent=True)
        await asyncio.gather(*town)
        assert done.index("visitor") <= 1  # behind the call on the wire at most
        stats = await admin(url, "/_fake/stats")
        assert stats["max_in_flight"] <= 8


@pytest.mark.parametrize("slots", [0, 3])
async def test_a_server_that_says_its_slots_is_sent_that_many_calls_at_once(
    rig_factory: Callable[..., Rig], slots: int
) -> None:
    async with running(latency_ms=50, slots=slots) as url:
        gateway, _, _ = rig_factory(url, concurrency=8)
        await gateway.run(EMOJI, sample(EMOJI))
        told = gateway.pacer.said_by == "server"
        assert told == bool(slots)  # (a hosted API, with no /props, says nothing)
        await asyncio.gather(*(gateway.run(EMOJI, sample(EMOJI)) for _ in range(12)))
        stats = await admin(url, "/_fake/stats")
        if slots:
            assert gateway.pacer.slots == slots and stats["max_in_flight"] == slots
        else:  # as set: the setting's slots at once
            assert gateway.pacer.slots == 8 and stats["requests"] == 13


async def test_behind_its_pace_the_town_rates_importance_offline_first(
    rig_factory: Callable[..., Rig],
) -> None:
    async with running() as url:
        gateway, _, _ = rig_factory(url, concurrency=1, pace_s=10.0)
        gateway.pacer.answered(4.0)  # a call takes 4 s
        gateway.pacer._waiting = [(urgency.PLANNING, n) for n in range(2)]  # 8 s of calls ahead
        assert (await gateway.run(RATE_IMPORTANCE, sample(RATE_IMPORTANCE))).scores
        gateway.pace_s = 20.0  # 8 s of 20: importance ratings go offline, decomposition waits
        assert gateway._behind(RATE_IMPORTANCE) and not gateway._behind(DECOMPOSE)
        gateway.pace_s = None  # always wait for the model
        assert not gateway._behind(RATE_IMPORTANCE)
        gateway.pacer._waiting = []
        for _ in range(2):
            await gateway.run(RATE_IMPORTANCE, sample(RATE_IMPORTANCE))
        answers = gateway.report.as_json()
        assert answers["fallbacks_by_task"] == {"rate_importance": {"pace": 1}}
        assert answers["answers_by_task"]["rate_importance"] == {"model": 2, "fallback": 1}


async def test_a_rating_that_waited_past_its_share_of_the_tick_leaves_for_the_offline_brain(
    rig_factory: Callable[..., Rig],
) -> None:
    async with running() as url:
        gateway, tally, _ = rig_factory(url, concurrency=1, pace_s=0.05)
        async with gateway.pacer.slot():  # a visitor's reply on the wire all along
            rated = await gateway.run(RATE_IMPORTANCE, sample(RATE_IMPORTANCE))
            assert gateway.pacer.waiting == 0
        assert rated.scores and tally.total.calls == 0  # never sent
        answers = gateway.report.as_json()
        assert answers["fallbacks_by_task"] == {"rate_importance": {"pace": 1}}
        gateway.pace_s = None  # always wait for the model: it waits its turn
        assert (await gateway.run(RATE_IMPORTANCE, sample(RATE_IMPORTANCE))).scores
        assert tally.total.calls == 1


async def test_a_reply_to_words_to_everyone_waits_about_one_call_then_the_offline_brain_answers(
    rig_factory: Callable[..., Rig],
) -> None:
    async with running() as url:
        gateway, tally, _ = rig_factory(url, concurrency=1, pace_s=4.0)
        gateway.pacer.told(1)
        gateway.pacer.answered(1.0)  # a call takes 1 s
        gateway.pacer._waiting = [(urgency.VISITOR, -1)]  # another visitor's reply goes first
        gateway.pacer.in_flight = 1  # behind a call on the wire: 2 s before a slot
        with urgency.person_waiting(urgency.VISITOR):
            assert not gateway._behind(UTTER)  # addressed: it waits its turn
            with urgency.to_everyone():
                assert gateway._behind(UTTER)
                assert (await gateway.run(UTTER, sample(UTTER))).text
                gateway.pacer._waiting = []  # one call ahead: about a call's time, it waits
                assert not gateway._behind(UTTER)
                gateway.pacer._waiting = [(urgency.VISITOR, -1)]
                gateway.pace_s = None  # always wait for the model: people too
                assert not gateway._behind(UTTER)
        assert tally.total.calls == 0
        assert gateway.report.as_json()["fallbacks_by_task"] == {"utter": {"pace": 1}}


async def test_a_visitors_call_cuts_the_town_call_on_a_one_slot_servers_wire(
    rig_factory: Callable[..., Rig],
) -> None:
    async with running(latency_ms=400, slots=1) as url:
        gateway, tally, _ = rig_factory(url)
        finished: list[str] = []

        async def ask(who: str, urgent: int | None) -> None:
            if urgent is None:
                await gateway.run(EMOJI, sample(EMOJI))  # the town's talk: streamed
            else:
                with urgency.person_waiting(urgent):
                    await gateway.run(EMOJI, sample(EMOJI))
            finished.append(who)

        town = asyncio.create_task(ask("town", None))
        while (await admin(url, "/_fake/stats"))["requests"] < 1:  # noqa: ASYNC110 (it streams)
            await asyncio.sleep(0.01)  # (the server is another party: its word, asked again)
        await ask("visitor", urgency.VISITOR)
        await town
        stats = await admin(url, "/_fake/stats")
    assert finished == ["visitor", "town"]  # the visitor waited for no town call
    assert gateway.pacer.cuts == 1 and stats["cut"] == 1
    assert stats["requests"] == 3  # the town's call was sent again, and answered by the model
    assert gateway.report.as_json()["fallbacks_by_task"] == {}
    assert tally.total.calls == 3


async def test_a_stream_the_server_ends_early_is_sent_again_and_whole_after_three(
    rig_factory: Callable[..., Rig],
) -> None:
    async with running() as url:
        gateway, _, _ = rig_factory(url)
        await faults(url, "interrupted")  # as llama-cpp-python does for a call that came in
        assert (await gateway.run(EMOJI, sample(EMOJI))).emoji
        assert gateway.pacer.slots == 1  # it answers one call at a time
        assert gateway.report.as_json()["fallbacks_by_task"] == {}
        await faults(url, *["interrupted"] * 4)  # (the fourth meets a reply sent whole)
        assert (await gateway.run(EMOJI, sample(EMOJI))).emoji
        stats = await admin(url, "/_fake/stats")
    assert stats["requests"] == 2 + 4 and stats["by_fault"] == {"interrupted": 1 + 3}
    assert [r.get("stream") for r in stats["last_requests"][-4:]] == [True, True, True, None]
    assert gateway.report.as_json()["fallbacks_by_task"] == {}  # the model answered it

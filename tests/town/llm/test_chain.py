"""The town's brain as one composed chain: a server that ignores ``stream``, an A/B on one
server, the budget on every path (founding included), and every answer saying who made it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
from sqlmodel import col, func, select

from bot.runtime.settings import load_settings
from bot.runtime.wiring import build_brain
from standins.llm.server import running
from tests.factories import open_runtime
from tests.helpers import Composed, sample
from town.inputs.query import interview
from town.inputs.visit import Visit
from town.llm import made, urgency
from town.llm.check import Server, check_llm
from town.llm.client import open_client
from town.llm.port import OfflineBrain
from town.llm.tasks import EMOJI, RATE_IMPORTANCE, UTTER
from town.llm.usage import UsageTally
from town.store.db import Store
from town.store.models import LlmUsage, OutboxEvent


async def stats(url: str) -> dict[str, Any]:
    root = url.removesuffix("/v1")
    async with aiohttp.ClientSession() as http, http.get(root + "/_fake/stats") as response:
        found: dict[str, Any] = await response.json()
        return found


async def faults(url: str, *kinds: str) -> None:
    async with aiohttp.ClientSession() as http:
        await http.post(url.removesuffix("/v1") + "/_fake/faults", json={"queue": list(kinds)})


async def test_a_server_that_ignores_stream_is_read_whole_and_the_check_agrees() -> None:
    async with running(ignores_stream=True) as url:
        client = open_client(url, "key", 5.0, 0)
        tally = UsageTally()
        brain = Composed(client, "m", usage=tally)
        for _ in range(3):  # the town's calls: asked to stream, answered whole
            assert await brain.run(EMOJI, sample(EMOJI)) == OfflineBrain().answer(
                EMOJI, sample(EMOJI)
            )
        await client.close()
        sent = (await stats(url))["last_requests"]
        ok, said = await check_llm(Server(url, "key", "m", 5.0))
    assert brain.report.as_json()["fallback_share"] == 0.0 and tally.total.fallbacks == 0
    assert not brain.pacer.streams  # told once; the next calls are read whole
    assert [r.get("stream") for r in sent] == [True, None, None]
    assert ok and "does not stream" in said and "answers 100% of the town's thoughts" in said


async def test_the_check_fails_when_the_town_would_run_mostly_offline() -> None:
    async with running() as url:
        await faults(url, *["no_json"] * 12)
        ok, said = await check_llm(Server(url, "key", "m", 5.0))
    assert not ok and "try a larger model" in said and "rate_importance: offline" in said


async def test_an_ab_of_two_models_on_one_one_slot_server_shares_one_pacer(
    tmp_path: Path,
) -> None:
    async with running(latency_ms=50, slots=1) as url:
        settings = load_settings(
            data_dir=tmp_path, brain="llm", llm_base_url=url, llm_model="a", llm_model_b="b"
        )
        store = Store.open(f"sqlite:///{tmp_path / 'town.db'}")
        brain, handles, _usage = build_brain(settings, store, 1)
        first, second = handles.models
        assert first.pacer is second.pacer is handles.pacer
        done: list[str] = []

        async def rate(n: int) -> None:
            await brain.run(RATE_IMPORTANCE, sample(RATE_IMPORTANCE), resident=f"r{n}")
            done.append(f"rating {n}")

        await rate(-1)  # the server asked its slots: one
        assert handles.pacer is not None and handles.pacer.slots == 1
        town = [asyncio.create_task(rate(n)) for n in range(6)]
        while handles.pacer.waiting < 5:  # noqa: ASYNC110 (the pacer is ours: no event to wait on)
            await asyncio.sleep(0)
        with urgency.person_waiting(urgency.VISITOR):
            await brain.run(UTTER, sample(UTTER), resident="r0")
        done.append("visitor")
        await asyncio.gather(*town)
        served = await stats(url)
        store.dispose()
    assert done.index("visitor") <= 1  # behind the one call on the wire at most, either model's
    assert served["max_serving"] == 1


async def test_founding_and_interviews_count_against_the_town_s_budget(tmp_path: Path) -> None:
    async with running(overrun_tokens=3_000) as url:  # a server that ignores max_tokens
        settings = load_settings(
            data_dir=tmp_path,
            embedder="hash",
            brain="llm",
            llm_base_url=url,
            daily_token_budget=6_000,
            visitor_messages_per_minute=0,
        )
        runtime = await open_runtime(settings)
        try:
            founded = (await stats(url))["requests"]
            assert founded > 0  # the founding rated the seed memories with the model
            engine = runtime.opened.engine
            for _ in range(6):
                await engine.tick()
            runtime.opened.usage.flush()
            with engine.store.session() as s:
                calls, tokens = s.exec(
                    select(
                        func.sum(LlmUsage.calls),
                        func.sum(LlmUsage.prompt_tokens + LlmUsage.completion_tokens),
                    )
                ).one()
            served = await stats(url)
        finally:
            runtime.opened.services.close()
    assert calls == served["requests"]  # every call the server got is the town's, founding too
    one_call = 3_000  # at most one call's worth past the budget
    assert tokens <= 6_000 + one_call
    fallbacks = runtime.opened.engine.llm.report.as_json()["fallbacks_by_task"]
    assert any("budget" in reasons for reasons in fallbacks.values())  # then it ran offline


async def test_founding_and_interviews_are_served_one_call_past_the_budget_at_most(
    tmp_path: Path,
) -> None:
    """A server that ignores ``max_tokens`` and ``stream`` serves every reply whole at 3,000
    tokens: the town counts what it was served, so the founding and a reporter's interviews
    are served at most one call past the daily budget, and then answered offline."""
    async with running(overrun_tokens=3_000, ignores_stream=True) as url:
        settings = load_settings(
            data_dir=tmp_path,
            embedder="hash",
            brain="llm",
            llm_base_url=url,
            daily_token_budget=12_000,
            visitor_messages_per_minute=0,
        )
        runtime = await open_runtime(settings)
        try:
            engine = runtime.opened.engine
            answers = [
                await interview(engine, "Isabella", f"What is on your mind, {n}?", "a reporter")
                for n in range(6)
            ]
            served = await stats(url)
            report = engine.llm.report.as_json()
        finally:
            runtime.opened.services.close()
    one_call = 3_000 + 1_500  # a reply at the server's length and an interview's prompt
    assert served["by_task"].get("interview", 0) >= 1  # the budget left room for some
    assert served["tokens"] <= 12_000 + one_call
    assert all(answers) and report["fallbacks_by_task"]["interview"] == {
        "budget": 6 - (served["by_task"]["interview"])
    }


async def test_an_offline_line_is_never_credited_to_the_model(tmp_path: Path) -> None:
    async with running() as url:
        settings = load_settings(
            data_dir=tmp_path,
            embedder="hash",
            brain="llm",
            llm_base_url=url,
            llm_model="model-under-test",
            visitor_messages_per_minute=0,
        )
        runtime = await open_runtime(settings)
        try:
            engine = runtime.opened.engine
            for _ in range(4):  # 07:30: Isabella and Klaus at the cafe
                await engine.tick()
            hello = "Isabella, how are you?"
            await runtime.visitor_says(Visit.of("Hobbs Cafe", "Ana", hello, "web", "v-ana"))
            await faults(url, *["500"] * 8)  # the next answer: the offline brain's
            asked = "Isabella, what are you up to today?"
            await runtime.visitor_says(Visit.of("Hobbs Cafe", "Ana", asked, "web", "v-ana"))
            with engine.store.session() as s:
                said = s.exec(
                    select(OutboxEvent)
                    .where(OutboxEvent.kind == "said")
                    .order_by(col(OutboxEvent.id))
                ).all()
        finally:
            runtime.opened.services.close()
    makers = [r.payload.get("model") for r in said if r.payload.get("reply_to") == "Ana"]
    assert makers[0] == "model-under-test"
    assert makers[-1] == made.offline("HTTP 500") and not made.by_model(makers[-1])

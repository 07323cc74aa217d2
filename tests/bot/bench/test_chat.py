"""The chat bench's figures, from what it measured."""

from __future__ import annotations

import random

import pytest

from bot.bench.chat import ChatBench, Message, ideal_waits, run_chat_bench
from bot.runtime.settings import load_settings


def test_the_figures_are_what_the_visitors_felt() -> None:
    bench = ChatBench(tick_seconds=10, replies_in_digests=0, replies_held=2, slots=1, skipped=1)
    bench.answers = {"fallbacks_by_task": {"rate_importance": {"pace": 3}}}
    bench.messages = [
        Message("addressed", 0.0, 1.0, chain=1, awake_there=True),
        Message("addressed", 5.0, 7.0, chain=1, awake_there=True),
        Message("greeting", 0.0, 2.0, chain=1, awake_there=True),
        Message("greeting", 0.0, None, chain=0, awake_there=True),  # unanswered
        Message("greeting", 0.0, None, chain=0, awake_there=False),  # nobody awake there
        Message("follow-up", 0.0, 3.0, chain=2, awake_there=True),
    ]
    bench.ticks = [4.0, 9.5, 12.0, 3.0]
    got = bench.as_json()
    assert set(got) >= {
        "first_reply_p95_s_addressed",
        "first_reply_p95_s_other",
        "longest_chain_addressed",
        "longest_chain_other",
        "unanswered_greetings",
        "replies_in_digests",
        "replies_held_behind_narration",
        "ticks_on_time_pct",
    }
    assert got["first_reply_p50_s_addressed"] == 1.5 and got["first_reply_p95_s_addressed"] == 1.95
    assert got["first_reply_p95_s_other"] == 2.95
    assert (got["longest_chain_addressed"], got["longest_chain_other"]) == (1, 2)
    assert got["unanswered_greetings"] == 1 and got["ticks_on_time_pct"] == 75.0
    assert got["replies_held_behind_narration"] == 2
    assert got["slots"] == 1 and got["clock_behind_pct"] == 20.0  # 1 of 5 runs due skipped
    assert got["fallbacks_by_task"] == {"rate_importance": {"pace": 3}}


def test_views_and_writes_are_reported() -> None:
    bench = ChatBench(tick_seconds=10)
    bench.views_ms = [10.0, 20.0, 30.0, 40.0, 50.0]
    bench.longest_write_ms, bench.rethought_calls = 42.25, 0
    got = bench.as_json()
    assert got["views"] == 5 and got["view_p50_ms"] == 30.0 and got["view_p95_ms"] == 48.0
    assert got["longest_write_ms"] == 42.2 and got["rethought_calls"] == 0


async def test_the_configured_llm_needs_settings_and_a_known_choice() -> None:
    with pytest.raises(ValueError, match="BOTTOWN_LLM_BASE_URL"):
        await run_chat_bench(load_settings(embedder="hash"), minutes=0.1, llm="configured")
    with pytest.raises(ValueError, match="--llm must be one of fake, configured"):
        await run_chat_bench(load_settings(embedder="hash"), minutes=0.1, llm="real")


async def test_visitors_are_answered_by_the_configured_llm(fake_llm: str) -> None:
    settings = load_settings(llm_base_url=fake_llm, llm_model="bottown-fake", embedder="hash")
    bench = await run_chat_bench(
        settings, visitors=2, places=1, minutes=0.1, tick_seconds=2, llm="configured"
    )
    figures = bench.as_json()
    assert figures["llm"] == "configured" and figures["slots"] == 0
    assert figures["messages"] >= 1 and figures["first_reply_p50_s_addressed"] is not None
    assert figures["call_p50_s"] is not None  # the server's own time, to read replies against


def test_the_ideal_serves_the_same_arrivals_with_only_visitors_calls_in_order() -> None:
    assert ideal_waits([0.0, 0.5, 0.6, 5.0], 1.0, 1) == [1.0, 1.5, 2.4, 1.0]
    assert ideal_waits([0.0, 0.5, 0.6], 1.0, 2) == [1.0, 1.0, 1.4]
    assert ideal_waits([0.0, 0.0, 0.0], 1.0, 0) == [1.0, 1.0, 1.0]  # no limit: a call each


def test_the_excess_is_the_wait_past_the_ideal_in_seconds_and_calls() -> None:
    bench = ChatBench(slots=1, call_p50_s=1.0)
    bench.messages = [  # three at once on one slot: the best is 1, 2 and 3 s
        Message("addressed", 0.0, 1.5),
        Message("addressed", 0.0, 2.5),
        Message("greeting", 0.0, 4.0),
    ]
    got = bench.as_json()
    assert got["ideal_p95_s"] == 2.9 and got["excess_p95_s"] == 0.5
    assert got["excess_p95_calls"] == 0.5 and got["arrivals"] == "burst"


def test_poisson_arrivals_come_at_the_rate_asked_across_all_visitors() -> None:
    bench = ChatBench(arrivals="poisson", rate=12.0)  # 12 a minute from 4: 0.05 a second each
    rng = random.Random(5)
    gaps = [bench.gap_s(rng, 4, first=False) for _ in range(4000)]
    assert 18 < sum(gaps) / len(gaps) < 22  # a mean gap of 20 s per visitor

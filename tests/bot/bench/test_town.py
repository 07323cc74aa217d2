"""``bottown bench town`` against the configured LLM (here the fake server, with faults)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from bot.bench.pace import Pace, behind_pct
from bot.bench.town import report_lines, run_town_bench
from bot.runtime.settings import load_settings


def queue_faults(url: str, *kinds: str) -> None:
    request = urllib.request.Request(
        url.removesuffix("/v1") + "/_fake/faults",
        data=json.dumps({"queue": list(kinds)}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request) as response:
        assert response.status == 200


async def test_the_configured_llm_is_benched_with_its_fallbacks(fake_llm: str) -> None:
    settings = load_settings(
        llm_base_url=fake_llm, llm_model="bottown-fake", embedder="hash", llm_max_attempts=1
    )
    queue_faults(fake_llm, "500", "500")  # the first thoughts fall back, once each
    figures = (await run_town_bench(settings, residents=2, hours=1, llm="configured")).as_json()
    assert figures["llm"] == "bottown-fake" and figures["response_format"] == "json_schema"
    answers = figures["answers_by_task"]
    total = sum(a["model"] + a["fallback"] for a in answers.values())
    assert sum(a["fallback"] for a in answers.values()) == 2
    assert figures["fallback_share"] == pytest.approx(2 / total, abs=1e-4)
    assert sum(r.get("HTTP 500", 0) for r in figures["fallbacks_by_task"].values()) == 2
    lines = report_lines(figures)
    assert lines[0].startswith("LLM bottown-fake (json_schema mode): ") and "HTTP 500" in lines[1]


async def test_configured_needs_an_llm() -> None:
    with pytest.raises(ValueError, match="BOTTOWN_LLM_BASE_URL"):
        await run_town_bench(load_settings(embedder="hash"), residents=1, hours=1, llm="configured")
    with pytest.raises(ValueError, match="--llm must be one of fake, configured"):
        await run_town_bench(load_settings(embedder="hash"), residents=1, hours=1, llm="real")


async def test_admin_commands_meet_thinking_ticks_and_nothing_is_thought_again(
    fake_llm: str,
) -> None:
    """``--admin-every-min``: whispers and ``set``s sent while ticks think; none of them makes a
    tick think again, and every tick's one write is timed."""
    settings = load_settings(
        llm_base_url=fake_llm, llm_model="bottown-fake", embedder="hash", llm_max_attempts=1
    )
    bench = await run_town_bench(
        settings, residents=2, hours=1, llm="configured", admin_every_min=20
    )
    figures = bench.as_json()
    assert figures["admin_inputs"] == 3  # (a tick is 10 game minutes: 20, 40, 60)
    assert figures["rethought_calls"] == 0
    assert figures["longest_write_ms"] > 0


async def test_paced_ticks_skip_the_runs_due_while_a_tick_outlasts_its_interval() -> None:
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    pace = Pace(10.0, lambda: now[0], sleep)
    starts = []
    for took in (5.0, 25.0, 3.0):
        starts.append(now[0])
        now[0] += took  # the tick
        await pace.next()
    assert starts == [0.0, 10.0, 40.0]  # the runs due at 20 and 30 were skipped
    assert pace.skipped == 2 and behind_pct(3, pace.skipped) == 40.0

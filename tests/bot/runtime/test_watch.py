"""``/healthz`` and ``/metrics``: scraped over HTTP and parsed with prometheus-client's own
parser; every family present, and moving with ticks and a visitor driven directly (the watch's
clock injected: each reading 1.5 s after the last)."""

from __future__ import annotations

import asyncio
import itertools
import shutil
from pathlib import Path
from typing import Any

import aiohttp
from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobSubmissionEvent
from prometheus_client.parser import text_string_to_metric_families

from adapters.core.delivery import OutboxPump
from adapters.web.server import WebAdapter
from adapters.web.watch import WatchServer
from bot.runtime.run import TownRuntime
from bot.runtime.scheduler import Timekeeper, job_id
from bot.runtime.settings import load_settings
from bot.runtime.watch import Watch
from bot.runtime.worker import Worker
from tests.adapters.web.support import HOBBS, someone_awake_at
from tests.factories import open_runtime
from tests.servers import free_port
from town.inputs.visit import Visit

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(http: aiohttp.ClientSession, url: str) -> tuple[set[str], Samples]:
    """The families' names and every sample, by name and labels."""
    response = await http.get(f"{url}/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=")
    names: set[str] = set()
    samples: Samples = {}
    for family in text_string_to_metric_families(await response.text()):
        names.add(family.name)
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return names, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum over every sample of ``name`` whose labels include ``labels``."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= set(ls))


FAMILIES = {
    "bottown_towns_held",
    "bottown_ticks",
    "bottown_tick_seconds",
    "bottown_clock_behind_ratio",
    "bottown_last_tick_timestamp_seconds",
    "bottown_llm_calls",
    "bottown_llm_tokens",
    "bottown_llm_fallbacks",
    "bottown_outbox_backlog",
    "bottown_deliveries",
    "bottown_first_reply_seconds",
}


async def test_every_family_is_present_and_moves_with_ticks_and_a_visitor(
    fake_llm: str, tmp_path: Path
) -> None:
    settings = load_settings(
        data_dir=tmp_path / "data",
        embedder="hash",
        brain="llm",
        llm_base_url=fake_llm,
        tick_seconds=600.0,
        visitor_messages_per_minute=0,
    )
    runtime = await open_runtime(settings)
    readings = itertools.count(0.0, 1.5)
    runtime.watch = Watch(runtime.store, clock=lambda: next(readings))
    web = WebAdapter(runtime, runtime.store, runtime.town_id, watch=runtime.watch)
    keeper = Timekeeper(runtime.store, settings)
    town = runtime.town_name
    try:
        await web.start()
        runtime.adapters.append(web)
        await keeper.add(runtime)
        runtime.keeper = keeper
        runtime.watch.hold(runtime)
        async with aiohttp.ClientSession() as http:
            names, before = await scrape(http, web.url)
            assert names >= FAMILIES
            assert value(before, "bottown_towns_held") == 1
            assert value(before, "bottown_clock_behind_ratio", town=town) == 0
            assert value(before, "bottown_ticks_total", town=town, outcome="committed") == 0

            live = keeper.towns[runtime.town_id]
            skipped = JobSubmissionEvent(EVENT_JOB_MAX_INSTANCES, job_id(runtime.town_id), "", [])
            for _ in range(2):
                await keeper._tick(live)  # the tick job, driven directly
                keeper._on_late(skipped)  # the next run fell due while it ran
            first = (await someone_awake_at(runtime, HOBBS)).split()[0]
            runtime.engine.llm.report.answered("rate_importance", "timeout")
            await runtime.visitor_says(
                Visit.of(HOBBS, "Alice", f"{first}, how are you?", "web", "a")
            )
            _, after = await scrape(http, web.url)

            assert value(after, "bottown_ticks_total", town=town, outcome="committed") == 2
            assert value(after, "bottown_tick_seconds_count", town=town) == 2
            assert value(after, "bottown_tick_seconds_sum", town=town) == 3.0
            assert value(after, "bottown_tick_seconds_bucket", town=town, le="1.0") == 0
            assert value(after, "bottown_tick_seconds_bucket", town=town, le="2.5") == 2
            assert value(after, "bottown_clock_behind_ratio", town=town) == 0.5
            assert value(after, "bottown_last_tick_timestamp_seconds", town=town) > 0
            calls = total(after, "bottown_llm_calls_total", town=town)
            assert calls > total(before, "bottown_llm_calls_total", town=town)
            prompt = total(after, "bottown_llm_tokens_total", town=town, kind="prompt")
            assert prompt > total(before, "bottown_llm_tokens_total", town=town, kind="prompt")
            fallback = {"town": town, "task": "rate_importance", "reason": "timeout"}
            assert value(after, "bottown_llm_fallbacks_total", **fallback) == 1
            reply = {"town": town, "platform": "web"}
            assert value(after, "bottown_first_reply_seconds_count", **reply) == 1
            assert value(after, "bottown_first_reply_seconds_bucket", **reply, le="1.0") == 0
            assert value(after, "bottown_first_reply_seconds_bucket", **reply, le="2.0") == 1
            backlog = value(after, "bottown_outbox_backlog", town=town, platform="web")
            assert backlog > 0 and total(after, "bottown_deliveries", town=town) == 0

            await OutboxPump(runtime.store, runtime.town_id, web).deliver_pending()
            _, delivered = await scrape(http, web.url)
            sent = value(delivered, "bottown_deliveries", town=town, platform="web", status="sent")
            assert sent > 0
            assert value(delivered, "bottown_outbox_backlog", town=town, platform="web") < backlog
    finally:
        runtime.keeper = None
        await keeper.remove(runtime)
        await keeper.close()
        await web.stop()
        runtime.opened.services.close()


async def test_healthz_is_503_while_the_database_is_unreachable(runtime: TownRuntime) -> None:
    runtime.watch = Watch(runtime.store)
    runtime.watch.hold(runtime)
    server = WatchServer(runtime.watch, "127.0.0.1", 0)
    await server.start()
    folder = Path(runtime.settings.data_dir)
    try:
        async with aiohttp.ClientSession() as http:
            healthy = await http.get(f"{server.url}/healthz")
            assert healthy.status == 200
            assert await healthy.json() == {"status": "ok", "towns": ["mini"]}
            runtime.store.dispose()  # no connection kept open: the next must find the file
            shutil.move(folder, folder.with_name("away"))
            try:
                down = await http.get(f"{server.url}/healthz")
                said: dict[str, Any] = await down.json()
                assert down.status == 503 and said["status"] == "database unreachable"
                assert "unable to open database file" in said["database"]
            finally:
                shutil.move(folder.with_name("away"), folder)
            again = await http.get(f"{server.url}/healthz")
            assert again.status == 200
    finally:
        await server.stop()


async def test_a_headless_worker_serves_health_and_metrics_on_its_port(tmp_path: Path) -> None:
    port = free_port()
    settings = load_settings(
        data_dir=tmp_path / "data", embedder="hash", brain="offline", metrics_port=port
    )
    worker = Worker(settings, "w1", towns=["mini"])
    stop = asyncio.Event()
    opened = await open_runtime(settings)  # the town, founded from the test's folder
    opened.opened.services.close()
    running = asyncio.create_task(worker.run(stop))
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(600):  # until the worker holds the town (a real worker's rounds)
                try:
                    response = await http.get(f"{url}/healthz")
                    if response.status == 200 and (await response.json())["towns"] == ["mini"]:
                        break
                except aiohttp.ClientConnectionError:
                    pass
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the worker never said it holds the town")
            names, samples = await scrape(http, url)
            assert names >= FAMILIES
            assert value(samples, "bottown_towns_held") == 1
            assert ("bottown_outbox_backlog", (("platform", "web"), ("town", "mini"))) not in (
                samples
            ), "a headless worker delivers nothing"
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)
    async with aiohttp.ClientSession() as http:
        try:
            await http.get(f"{url}/healthz")
            raise AssertionError("the port is still served after the worker stopped")
        except aiohttp.ClientConnectionError:
            pass

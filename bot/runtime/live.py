"""A live town on its platforms: ``bottown run`` and each of a worker's towns. ``serve`` opens (or
founds) a town and runs it; ``run_town`` starts its adapters, one outbox pump each, the audit
log's retention and its tick job, and takes them down again on the way out."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from pydantic import SecretStr

from adapters.core.delivery import OutboxPump
from adapters.core.ports import Adapter
from adapters.web.watch import WatchServer
from bot.runtime.consent import leaving_forgets, replay_paths
from bot.runtime.run import PLATFORMS, TownRuntime
from bot.runtime.scheduler import Timekeeper
from bot.runtime.settings import Settings
from bot.runtime.taking_in import Doorbell
from bot.runtime.towns import OpenTown, founding_shown, open_town
from bot.runtime.watch import Watch
from town.features.consent.forget import finish_pending
from town.outbox import audit
from town.store.lease import Leases

log = logging.getLogger(__name__)


def per_minute(settings: Settings, platform: str) -> int:
    """Town messages one channel of ``platform`` takes a minute: the web page what a reader can
    follow, Discord and Slack their cap."""
    if platform == "web":
        return settings.web_messages_per_minute
    return settings.channel_messages_per_minute


def build_adapter(name: str, runtime: TownRuntime) -> Adapter:
    """The adapter called ``name``, configured from the settings."""
    settings = runtime.settings
    if name == "web":
        from adapters.web.server import WebAdapter

        return WebAdapter(
            runtime,
            runtime.store,
            runtime.town_id,
            host=settings.web_host,
            port=settings.web_port,
            data_dir=settings.data_dir,
            watch=runtime.watch,
        )
    if name == "discord":
        if settings.discord_token is None:
            raise ValueError("--platform discord needs BOTTOWN_DISCORD_TOKEN (see the README)")
        from adapters.discord.adapter import DiscordAdapter

        return DiscordAdapter(
            runtime,
            runtime.store,
            runtime.town_id,
            token=settings.discord_token.get_secret_value(),
            guild_id=settings.discord_guild_id,
            message_content=settings.discord_message_content,
            member_departures="leave" in leaving_forgets(settings.forget_on_leave),
        )
    if name == "slack":
        if settings.slack_bot_token is None:
            raise ValueError("--platform slack needs BOTTOWN_SLACK_BOT_TOKEN (see the README)")
        from adapters.slack.adapter import SlackAdapter

        return SlackAdapter(
            runtime,
            runtime.store,
            runtime.town_id,
            bot_token=settings.slack_bot_token.get_secret_value(),
            app_token=_secret(settings.slack_app_token),
            signing_secret=_secret(settings.slack_signing_secret),
            mode=settings.slack_mode,
            port=settings.slack_port,
            host=settings.slack_host,
            api_url=settings.slack_api_url,
        )
    raise ValueError(f"unknown platform {name!r}; choose from {', '.join(PLATFORMS)}")


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def default_platforms(settings: Settings) -> list[str]:
    """The platforms whose tokens are set; the local web adapter when none is."""
    found = []
    if settings.discord_token is not None:
        found.append("discord")
    if settings.slack_bot_token is not None or settings.slack_client_id is not None:
        found.append("slack")
    return found or ["web"]


async def serve(
    settings: Settings,
    platforms: list[str],
    *,
    town: str | None = None,
    persona: str | None = None,
    ready: Callable[[TownRuntime], None] | None = None,
) -> None:
    """Open (or found) a town and run it on ``platforms`` until cancelled, or until SIGTERM,
    which stops it as Ctrl-C does (everything saved) and returns."""
    with founding_shown() as founding:
        name = town or settings.town
        opened = await open_town(settings, name, persona=persona, create=True, founding=founding)
    try:
        _refuse_if_a_worker_runs(opened, settings)
        watch = Watch(opened.services.store)
        async with watch_served(watch, settings):
            runtime = TownRuntime(opened, settings, watch=watch)
            await until_terminated(run_town(runtime, platforms, ready=ready))
    finally:
        opened.services.close()


async def until_terminated(running: Coroutine[Any, Any, None]) -> None:
    """``running`` until it ends, or until the process is sent SIGTERM (a service manager's
    stop, ``kill``): then it is cancelled as Ctrl-C cancels it, and this returns."""
    loop = asyncio.get_running_loop()
    terminated = asyncio.Event()
    try:
        loop.add_signal_handler(signal.SIGTERM, terminated.set)
    except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
        await running
        return
    task = asyncio.ensure_future(running)
    waiting = asyncio.ensure_future(terminated.wait())
    try:
        await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        waiting.cancel()
        if not task.done():
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if terminated.is_set():
        log.info("SIGTERM: the town stopped, everything saved")
    else:
        task.result()


@contextlib.asynccontextmanager
async def watch_served(watch: Watch, settings: Settings) -> AsyncIterator[None]:
    """``/healthz`` and ``/metrics`` on ``metrics_host:metrics_port`` while it runs (when the
    port is set; the web adapter serves them on its own port anyway)."""
    if settings.metrics_port is None:
        yield
        return
    server = WatchServer(watch, settings.metrics_host, settings.metrics_port)
    await server.start()
    try:
        yield
    finally:
        await server.stop()


def _refuse_if_a_worker_runs(opened: OpenTown, settings: Settings) -> None:
    """``bottown run`` takes no lease: on a database that workers share, it must not tick a town
    a live worker holds (the town would be ticked twice)."""
    assert opened.town.id is not None
    leases = Leases(opened.services.store, "bottown-run", settings.lease_seconds)
    if not leases.vacant([opened.town.id]):
        raise ValueError(
            f"the town {opened.town.name!r} is run by a live `bottown worker` (see "
            "`bottown worker --status`); stop that worker, or serve the town with "
            f"`bottown worker --towns {opened.town.name} --platform ...`"
        )


async def run_town(
    runtime: TownRuntime,
    platforms: list[str],
    *,
    ready: Callable[[TownRuntime], None] | None = None,
    keeper: Timekeeper | None = None,
    make_adapter: Callable[[str, TownRuntime], Adapter] = build_adapter,
    doorbell: Doorbell | None = None,
) -> None:
    """Run an open town until cancelled: its adapters, one outbox pump each, and its tick job on
    ``keeper`` (a worker's, shared by its towns; None: one of the town's own), made up for missed
    time first; the town is held in its watch (``/metrics``) while it runs. ``make_adapter``
    builds each platform's adapter (one on a shared gateway, for a community's town); with a
    ``doorbell`` (a worker's), the town takes in what gateway processes stored for it. A tick
    that raises what ``runtime.stop_on`` names ends the run with that exception. On the way out
    the town's job goes (a running tick rolls back). The caller owns ``runtime.opened`` and
    closes it."""
    tasks: list[asyncio.Task[None]] = []
    own_keeper = keeper is None
    keeper = keeper or Timekeeper(runtime.store, runtime.settings)
    try:  # a forget a crash cut short (a worker's town too) finishes first
        await finish_pending(runtime.engine, replay_paths(runtime.settings.data_dir))
        for name in platforms:
            adapter = make_adapter(name, runtime)
            await adapter.start()
            runtime.adapters.append(adapter)
            pump = OutboxPump(
                runtime.store,
                runtime.town_id,
                adapter,
                channel_per_minute=per_minute(runtime.settings, name),
                tick_s=runtime.settings.tick_seconds,
            )
            runtime.pumps.append(pump)
            tasks.append(asyncio.create_task(pump.run(runtime.wake), name=f"outbox-{name}"))
        if doorbell is not None:
            tasks.append(asyncio.create_task(doorbell.keep_taking(runtime), name="taking-in"))
        days = runtime.settings.audit_retention_days
        tasks.append(
            asyncio.create_task(audit.keep_pruned(runtime.engine, days), name="audit-retention")
        )
        stopped = await keeper.add(runtime)
        runtime.keeper = keeper
        runtime.watch.hold(runtime)
        if ready:
            ready(runtime)
        await asyncio.gather(*tasks, stopped)
    finally:
        runtime.watch.drop(runtime)
        runtime.keeper = None
        await keeper.remove(runtime)
        if own_keeper:
            await keeper.close()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for adapter in reversed(runtime.adapters):
            with contextlib.suppress(Exception):
                await adapter.stop()
        runtime.adapters.clear()
        runtime.pumps.clear()

"""``bottown worker``: run towns from a shared database with other workers, or show who runs
which (``--status``)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer
from rich.table import Table
from sqlmodel import select

from bot.cli.common import err, guarded, out, settings_and_logging
from bot.runtime.settings import Settings
from bot.runtime.wiring import open_store
from bot.runtime.worker import Worker, run_worker
from bot.runtime.worker_connection import default_worker_name
from town.store.lease import Leases, WorkerNameTaken, aware
from town.store.models import Town


def show_status(settings: Settings) -> None:
    """The live workers and the towns' leases, as tables."""
    store = open_store(settings)
    try:
        leases = Leases(store, "status", settings.lease_seconds)
        with store.session() as s:
            now = leases.now(s)
            names = {t.id: t.name for t in s.exec(select(Town)).all()}
        workers = Table("worker", "host", "pid", "heartbeat", title="live workers")
        for w in leases.live_workers():
            age = (now - aware(w.heartbeat_at)).total_seconds()
            workers.add_row(w.name, w.host, str(w.pid), f"{age:.0f} s ago")
        out.print(workers)
        table = Table("town", "worker", "epoch", "lease", title="leases")
        for row in leases.holders():
            left = (aware(row.expires_at) - now).total_seconds()
            state = f"{left:.0f} s left" if left > 0 else f"expired {-left:.0f} s ago"
            table.add_row(
                names.get(row.town_id, f"#{row.town_id}"), row.worker, str(row.epoch), state
            )
        out.print(table)
    finally:
        store.dispose()


def worker(
    name: Annotated[
        str | None,
        typer.Option(help="This worker's name (default: BOTTOWN_WORKER_NAME, else host-pid)."),
    ] = None,
    platform: Annotated[
        list[str] | None,
        typer.Option(
            "--platform",
            "-p",
            help="web, discord or slack (repeat for several); needs --towns with one town. "
            "Default: headless.",
        ),
    ] = None,
    towns: Annotated[
        str | None,
        typer.Option(help="Comma-separated town names (founded if missing); default: every town."),
    ] = None,
    status: Annotated[
        bool, typer.Option("--status", help="Show the live workers and the leases, then exit.")
    ] = False,
) -> None:
    """Run towns from a shared database with other workers: each town on one worker at a time."""

    def run() -> None:
        settings = settings_and_logging()
        if status:
            show_status(settings)
            return
        chosen = [t.strip() for t in towns.split(",") if t.strip()] if towns else None
        if towns is not None and not chosen:
            raise ValueError("--towns names no town")
        the_worker = Worker(
            settings,
            name or settings.worker_name or default_worker_name(),
            platforms=list(platform or []),
            towns=chosen,
        )
        try:
            asyncio.run(run_worker(settings, the_worker))
        except WorkerNameTaken as exc:
            err.print(f"error: {exc}", style="red", highlight=False, soft_wrap=True, markup=False)
            raise typer.Exit(2) from None

    guarded(run)

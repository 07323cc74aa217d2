"""The ``bottown`` command line."""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress
from importlib import metadata
from typing import Annotated

import typer
from rich.table import Table

from bot.cli import eval_interview
from bot.cli import town as cli_town
from bot.cli.audit import audit
from bot.cli.backup import backup, restore_backup
from bot.cli.bench import bench_app
from bot.cli.common import err, guarded, out, settings_and_logging
from bot.cli.eval_live import live
from bot.cli.eval_society import society
from bot.cli.experiment import experiment_app
from bot.cli.gateway import gateway
from bot.cli.memory import recall, remember
from bot.cli.own_town import town_app
from bot.cli.replay import replay
from bot.cli.worker import worker
from bot.runtime.logs import setup_logging
from bot.runtime.settings import load_settings, masked_url

app = typer.Typer(
    rich_markup_mode=None,
    name="bottown",
    no_args_is_help=True,
    add_completion=False,
)
llm_app = typer.Typer(rich_markup_mode=None, help="The LLM connection.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
app.add_typer(llm_app, name="llm")
app.add_typer(experiment_app, name="experiment")
app.add_typer(town_app, name="town")
eval_app = typer.Typer(
    rich_markup_mode=None, help="The papers' evaluations of a simulated town.", no_args_is_help=True
)
eval_app.command("society")(society)
eval_app.command("interview")(eval_interview.interview)
eval_app.command("rate")(eval_interview.rate)
eval_app.command("live")(live)
app.add_typer(eval_app, name="eval")
cli_town.register(app)
app.command()(audit)
app.command()(remember)
app.command()(recall)
app.command()(replay)
app.command()(worker)
app.command()(gateway)
app.command()(backup)
app.command("restore")(restore_backup)


@app.command()
def config() -> None:
    """Show the effective settings, secrets masked."""

    def show() -> None:
        settings = load_settings()
        table = Table("key", "value", title="bottown settings")
        for key, value in settings.model_dump().items():
            shown = "***" if "key" in key and value else value
            if key == "database_url" and value:
                shown = masked_url(str(value))
            table.add_row(key, str(shown))
        table.add_row("(database)", masked_url(settings.resolved_database_url))
        table.add_row("(brain)", "LLM " + settings.llm_model if settings.uses_llm else "offline")
        out.print(table)

    guarded(show)


@app.callback(invoke_without_command=True)
def main_options(
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, help="Show the version of bottown and exit."),
    ] = False,
) -> None:
    """A town of generative-agent residents for Discord, Slack and the browser."""
    if version:
        out.print(f"bottown {metadata.version('bottown')}", highlight=False)
        raise typer.Exit()


@app.command()
def migrate(
    backup: Annotated[
        bool,
        typer.Option(
            help="Copy an older database into the data folder's backups before upgrading it "
            "(--no-backup: you made your own, e.g. on PostgreSQL without pg_dump)."
        ),
    ] = True,
) -> None:
    """Create or upgrade the database schema (every command does this on start, too)."""

    def run() -> None:
        from bot.runtime.wiring import open_store

        settings = settings_and_logging()
        open_store(settings, back_up=backup)
        out.print(f"database {masked_url(settings.resolved_database_url)} is up to date")

    guarded(run)


@app.command("fake-llm")
def fake_llm(
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8900,
    host: Annotated[str, typer.Option(help="Interface; keep it on loopback.")] = "127.0.0.1",
    latency_ms: Annotated[float, typer.Option(help="Delay added to every completion.")] = 0.0,
    fault_rate: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of faulty replies.")
    ] = 0.0,
    seed: Annotated[int, typer.Option(help="Seed of the fault lottery.")] = 0,
    slots: Annotated[
        int,
        typer.Option(
            min=0,
            help="Completions answered at once, the rest waiting first come first served, as "
            "llama.cpp's -np (0: no limit, as a hosted API).",
        ),
    ] = 0,
    overrun_tokens: Annotated[
        int,
        typer.Option(
            min=0, help="Make every reply this many tokens long, ignoring max_tokens (0: off)."
        ),
    ] = 0,
    ignore_stream: Annotated[
        bool,
        typer.Option(
            "--ignore-stream", help="Answer a streamed request with the whole body, as some do."
        ),
    ] = False,
) -> None:
    """Serve a fake OpenAI-compatible API answered by the offline brain (for tests and benches)."""
    from standins.llm.server import serve

    setup_logging("INFO")
    out.print(
        f"fake OpenAI-compatible server on http://{host}:{port}/v1 "
        f"(offline brain, latency {latency_ms:g} ms, fault rate {fault_rate:g}, "
        f"{slots or 'unlimited'} slot{'' if slots == 1 else 's'}); Ctrl-C stops it"
    )
    with suppress(KeyboardInterrupt):
        asyncio.run(
            serve(
                host,
                port,
                latency_ms=latency_ms,
                fault_rate=fault_rate,
                seed=seed,
                slots=slots,
                overrun_tokens=overrun_tokens,
                ignores_stream=ignore_stream,
            )
        )


@llm_app.command("check")
def llm_check() -> None:
    """Make the town's own calls to the configured LLM and say plainly what the town will
    get: the share of its thoughts the model answers, the mode, the server's slots."""
    from town.llm.check import Server, check_llm
    from town.llm.pacing import default_slots

    def run() -> None:
        settings = settings_and_logging()
        if not settings.uses_llm:
            out.print(
                "no LLM configured: the town runs on the offline brain "
                "(set BOTTOWN_LLM_BASE_URL and/or BOTTOWN_LLM_API_KEY)"
            )
            return
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "not-needed"
        slots = settings.llm_slots or default_slots(settings.llm_base_url, settings.llm_concurrency)
        server = Server(
            settings.llm_base_url, key, settings.llm_model, settings.llm_timeout_s, slots
        )
        ok, message = asyncio.run(check_llm(server))
        (out if ok else err).print(message, highlight=False)
        if not ok:
            raise typer.Exit(1)

    guarded(run)


@app.command()
def demo(
    headless: Annotated[
        bool, typer.Option(help="Run a morning in the terminal instead of serving the page.")
    ] = False,
    hours: Annotated[
        float, typer.Option(min=0.5, max=48, help="With --headless: game hours to run.")
    ] = 5.0,
    tick_seconds: Annotated[
        float | None,
        typer.Option(
            min=0.1,
            help="Real seconds between ticks while served "
            "(default: 4, or BOTTOWN_DEMO_TICK_SECONDS).",
        ),
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port of the page (default: 8765, or BOTTOWN_WEB_PORT).")
    ] = None,
) -> None:
    """Smallville afresh: served in the browser (make demo), or a morning headless."""
    from bot.runtime.demo import run_demo, serve_demo

    def run() -> None:
        settings = settings_and_logging()
        if port is not None:
            settings = settings.model_copy(update={"web_port": port})
        try:
            if headless:
                asyncio.run(run_demo(settings, out, hours))
            else:
                asyncio.run(serve_demo(settings, out, tick_seconds=tick_seconds))
        except KeyboardInterrupt:
            err.print("stopped")

    guarded(run)


def main() -> None:  # pragma: no cover - the console script calls app()
    app()


if __name__ == "__main__":  # pragma: no cover
    logging.captureWarnings(True)
    app()

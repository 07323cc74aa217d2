"""``bottown replay FILE``: a recorded simulation in the browser, with a timeline to scrub."""

from __future__ import annotations

import asyncio
from contextlib import suppress
from pathlib import Path
from typing import Annotated

import typer

from adapters.web.replay import ReplayPage, read_replay
from bot.cli.common import guarded, out, settings_and_logging
from town.views.card import MapPlace
from town.world.load import available_towns, load_town


def replay(
    file: Annotated[Path, typer.Argument(help="A replay (JSON lines), e.g. data/replays/x.jsonl.")],
    town: Annotated[
        str | None,
        typer.Option(help="Persona folder for the map and avatars (default: the file's name)."),
    ] = None,
    port: Annotated[int, typer.Option(help="Port of the page (0: any free one).")] = 0,
) -> None:
    """Play a recorded simulation on the web page: map, channels, a timeline to scrub."""

    def run() -> None:
        settings = settings_and_logging()
        recorded = read_replay(file)
        folder = town or (file.stem if file.stem in available_towns() else None)
        places: list[MapPlace] = []
        avatars: dict[str, str] = {}
        name = file.stem
        if folder is not None:
            spec = load_town(folder)
            name = spec.name
            places = [MapPlace(a.name, a.description, a.map) for a in spec.areas]
            avatars = {r.name: r.avatar_emoji for r in spec.residents}
        page = ReplayPage(recorded, name, places, avatars, host=settings.web_host, port=port)
        skipped = f" ({recorded.skipped} lines were not events)" if recorded.skipped else ""
        with suppress(KeyboardInterrupt):
            asyncio.run(_serve(page, len(recorded.events), skipped))

    guarded(run)


async def _serve(page: ReplayPage, events: int, skipped: str) -> None:
    await page.start()
    out.print(f"[bold green]{events} events{skipped}: open {page.url}[/bold green]  Ctrl-C stops.")
    try:
        await asyncio.Event().wait()
    finally:
        await page.stop()

"""``bottown backup DIR`` and ``bottown restore DIR``."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from bot.cli.common import guarded, out, settings_and_logging
from bot.runtime.backup import back_up, restore


def backup(
    folder: Annotated[Path, typer.Argument(help="A new or empty folder for the copy.")],
) -> None:
    """Copy the database, the Chroma folder, the replays and the towns' own persona folders,
    while the towns run."""

    def run() -> None:
        manifest = back_up(settings_and_logging(), folder, datetime.now(UTC))
        counts = ", ".join(f"{k} {n}" for k, n in manifest.counts.items())
        out.print(
            f"backed up to {folder}: schema {'+'.join(manifest.schema)}, {counts}; "
            f"Chroma: {manifest.chroma}",
            highlight=False,
            markup=False,
        )

    guarded(run)


def restore_backup(
    folder: Annotated[Path, typer.Argument(help="A folder `bottown backup` wrote.")],
) -> None:
    """Bring a backup back into a fresh data folder (BOTTOWN_DATA_DIR) and database."""

    def run() -> None:
        settings = settings_and_logging()
        restored = restore(settings, folder)
        made = restored.manifest
        out.print(
            f"restored {folder} (bottown {made.version}, made {made.created}) into "
            f"{settings.data_dir}; vectors embedded again: {restored.reembedded}",
            highlight=False,
            markup=False,
        )
        for kept in restored.personas_kept:
            out.print(f"persona folder {kept} exists: left as it is", markup=False)

    guarded(run)

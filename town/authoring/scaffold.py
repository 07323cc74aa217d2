"""``bottown town new``: a small working town with every field commented, or a copy of a
shipped one, written into a folder that does not exist yet."""

from __future__ import annotations

import shutil
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from town.world.load import town_folder
from town.world.persona import RESIDENTS_FILE, SCENARIO_FILE, TOWN_FILE

TOWN_FILES = (TOWN_FILE, RESIDENTS_FILE, SCENARIO_FILE)
TEMPLATES = resources.files(__package__).joinpath("templates")


class FolderExists(ValueError):
    """``town new`` never writes into a folder that exists."""


def refuse_existing(folder: Path) -> None:
    if folder.exists():
        raise FolderExists(f"{folder} exists already; give a new folder name (nothing was written)")


def new_town(folder: Path, *, copy_of: str | None = None) -> list[Path]:
    """Write the scaffold (or the shipped town ``copy_of``, with any file of its own, such as
    ``interviews.toml``) into ``folder``; returns the files written."""
    source: Traversable = TEMPLATES if copy_of is None else town_folder(copy_of)
    names = sorted(item.name for item in source.iterdir() if item.name.endswith(".toml"))
    return write_files(folder, {name: (source / name).read_text("utf-8") for name in names})


def write_files(folder: Path, files: dict[str, str]) -> list[Path]:
    """Write ``files`` (name -> text) into the new ``folder``, all of them or none."""
    refuse_existing(folder)
    staging = folder.with_name(f".{folder.name}.new")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        for name, text in files.items():
            (staging / name).write_text(text, "utf-8")
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [folder / name for name in files]


def next_steps(folder: Path) -> list[str]:
    """What to do with a new town folder, for the console."""
    path = folder.as_posix() if "/" in folder.as_posix() else f"./{folder}"  # a path, not a name
    return [
        f"edit the three files in {folder} (every field is explained in a comment)",
        f"bottown town check {path}",
        f"bottown run --town {folder.name} --persona {path}",
        f"later, edits to a running town: bottown town update {path} --town {folder.name}",
    ]

"""Edits of the three-resident town's folder, as a person makes them before ``town update``:
a new place with a newcomer's home (Harbour Quay, Finn Reed), a resident taken out."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.factories import MINITOWN

QUAY = """
[[areas]]
name = "Harbour Quay"
description = "the quay where the boats tie up"

[[areas.sub_areas]]
name = "pier"
objects = { boat = "moored" }

[[areas.sub_areas]]
name = "Finn's cabin"
objects = { hammock = "slung" }
"""
FINN = """
[[residents]]
name = "Finn Reed"
age = 33
traits = ["quiet", "patient", "kind"]
occupation = "fisherman"
paragraph = '''
Finn Reed fishes off Harbour Quay; Finn Reed sells fish to Isabella Rodriguez;
Finn Reed has just come to town
'''
home = "Harbour Quay: Finn's cabin"
workplace = "Harbour Quay: pier"
known_places = ["Harbour Quay", "Hobbs Cafe"]
wake_time = "06:00"
sleep_time = "21:00"
routine = ["get up", "fish", "sell the catch", "mend nets", "sleep"]
avatar_emoji = "🎣"
"""


def folder_with(tmp_path: Path, *, town: str = "", residents: str = "") -> Path:
    """The three-resident town's folder, copied and added to."""
    folder = tmp_path / "mini-edited"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(MINITOWN, folder)
    for name, extra in (("town.toml", town), ("residents.toml", residents)):
        path = folder / name
        path.write_text(path.read_text("utf-8") + extra, "utf-8")
    return folder


def without(folder: Path, name: str) -> None:
    """Take the resident ``name`` out of residents.toml."""
    path = folder / "residents.toml"
    entries = path.read_text("utf-8").split("[[residents]]")
    path.write_text("[[residents]]".join(e for e in entries if f'"{name}"' not in e), "utf-8")

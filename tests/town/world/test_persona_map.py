"""An area's optional place on the map in ``town.toml``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.factories import MINITOWN
from town.world.load import load_town
from town.world.persona import MapBox, PersonaError


def town_with(tmp_path: Path, box: str) -> Path:
    folder = tmp_path / "town"
    shutil.copytree(MINITOWN, folder)
    town = folder / "town.toml"
    text = town.read_text(encoding="utf-8")
    town.write_text(text.replace('name = "Hobbs Cafe"\n', f'name = "Hobbs Cafe"\nmap = {box}\n', 1))
    return folder


def test_an_area_may_give_its_box_on_the_map(tmp_path: Path) -> None:
    spec = load_town(town_with(tmp_path, "{ x = 2, y = 1, w = 3 }"))
    assert spec.area("Hobbs Cafe").map == MapBox(x=2, y=1, w=3, h=1)
    assert spec.area("Mueller home").map is None  # laid out by the page


def test_a_box_off_the_grid_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PersonaError, match="map"):
        load_town(town_with(tmp_path, "{ x = -1, y = 0 }"))

"""A founding shows its progress: each resident's memories rated, of how many."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from bot.runtime.settings import load_settings
from bot.runtime.towns import founding_shown, open_town
from tests.factories import MINITOWN


async def test_a_founding_is_told_each_resident_rated_and_an_open_town_is_not(
    tmp_path: Path,
) -> None:
    settings = load_settings(data_dir=tmp_path, embedder="hash")
    told: list[tuple[int, int]] = []
    opened = await open_town(
        settings, "mini", persona=str(MINITOWN), create=True, founding=lambda *n: told.append(n)
    )
    opened.services.close()
    assert told == [(1, 3), (2, 3), (3, 3)]  # the three residents, each once
    again = await open_town(settings, "mini", founding=lambda *n: told.append(n))
    again.services.close()
    assert len(told) == 3  # a town that exists is opened, not founded


def test_the_founding_bar_shows_only_once_a_resident_is_rated() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100)
    with founding_shown(console):
        pass
    assert screen.getvalue() == ""  # nothing founded: no bar
    with founding_shown(console) as rated:
        rated(1, 25)
    assert "founding" in screen.getvalue() and "1/25" in screen.getvalue()

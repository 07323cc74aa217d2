"""The shared two-day Smallville run of the offline brain's story tests (one run for the
package: it takes about a minute)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from bot.cli.main import app as bottown
from town.experiments.society.attendance import read_replay
from town.world.load import load_town
from town.world.persona import TownSpec


@pytest.fixture(scope="package")
def town() -> TownSpec:
    return load_town("smallville")


@pytest.fixture(scope="package")
def story_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("story")


@pytest.fixture(scope="package")
def run(story_dir: Path) -> list[dict[str, Any]]:
    """Two game days of Smallville with the offline brain (the hash embedder, for speed)."""
    data = story_dir
    with pytest.MonkeyPatch.context() as env:
        env.setenv("BOTTOWN_DATA_DIR", str(data))
        env.setenv("BOTTOWN_EMBEDDER", "hash")
        env.setenv("HF_HUB_OFFLINE", "1")
        env.chdir(data)
        done = CliRunner().invoke(bottown, ["simulate", "--days", "2", "--brain", "offline"])
    assert done.exit_code == 0, done.output
    events, bad = read_replay(data / "replays" / "smallville.jsonl")
    assert bad == 0
    return events

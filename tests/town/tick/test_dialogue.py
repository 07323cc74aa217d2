"""What residents bring to a talk: what they recall of each other and the news they hold, a
private memory only for its subject or a close friend."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.factories import MINITOWN, make_engine, memories, resident
from town.store.db import Store
from town.tick.state import ResidentState

SECRET = "Klaus Mueller is afraid his paper on gentrification will be late"


@pytest.fixture
def secretive(tmp_path: Path) -> Path:
    """The three-resident town, Klaus holding a private fear (about no one else)."""
    folder = tmp_path / "secretive"
    shutil.copytree(MINITOWN, folder)
    residents = folder / "residents.toml"
    text = residents.read_text(encoding="utf-8")
    marker = 'home = "Mueller home: bedroom"'
    residents.write_text(text.replace(marker, f'private = "{SECRET}"\n{marker}'), "utf-8")
    return folder


async def test_a_private_memory_stays_out_of_a_talk_with_others(
    store: Store, secretive: Path
) -> None:
    engine = await make_engine(store, persona=secretive)
    stored = [m for m in memories(store, "Klaus Mueller") if m.kind == "seed"]
    assert [m.text for m in stored if m.private] == [SECRET]
    assert sum(m.private for m in stored) == 1
    recalled: list[str] = []
    for _ in range(24):
        await engine.tick()
        state = ResidentState.of(resident(store, "Klaus Mueller"))
        if state.talk is not None:
            recalled = state.talk_memories
            break
    assert recalled, "Klaus and Isabella talk in the morning"
    assert SECRET not in recalled
    assert any("Isabella" in m for m in recalled)

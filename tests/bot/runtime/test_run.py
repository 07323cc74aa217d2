"""A running town beside inputs from another process (the shell's ``bottown say`` on the same
data folder): no tick fails, and the words are heard."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from sqlmodel import select

from bot.runtime.run import TownRuntime
from tests.factories import CAFE_PAIR, at_cafe, memories, until
from town.inputs.admin import set_speed
from town.store.models import AuditEntry

HOBBS = "Hobbs Cafe"


async def shell_say(data: Path, text: str) -> tuple[int, str]:
    env = {
        **os.environ,
        "BOTTOWN_DATA_DIR": str(data),
        "BOTTOWN_EMBEDDER": "hash",
        "BOTTOWN_BRAIN": "offline",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli.main",
        "say",
        HOBBS,
        text,
        "--town",
        "mini",
        "--as",
        "Shelley",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def test_shell_inputs_beside_a_running_town_fail_no_tick(runtime: TownRuntime) -> None:
    engine = runtime.opened.engine
    await until(engine, at_cafe(runtime.store, *CAFE_PAIR))
    # a game minute a tick: however slowly the shell starts on a busy machine, the ticks meanwhile
    # stay within Isabella's morning at the cafe
    await set_speed(engine, 1)
    data = runtime.settings.data_dir
    said = asyncio.gather(*(shell_say(data, f"Hi Isabella, message {n}") for n in range(3)))
    failed = 0
    while not said.done():  # the town ticks on while the shell speaks
        failed += await runtime.tick() is None
        await asyncio.sleep(0)
    for code, out in await said:
        assert code == 0, out
    for _ in range(3):
        failed += await runtime.tick() is None
    assert failed == 0
    # (residents come and go meanwhile: those at the cafe when a message came heard it)
    heard = " ".join(m.text for name in CAFE_PAIR for m in memories(runtime.store, name))
    assert any(f'Shelley (a visitor) said: "Hi Isabella, message {n}"' in heard for n in range(3))
    with runtime.store.session() as s:
        said_in = list(s.exec(select(AuditEntry.text).where(AuditEntry.kind == "say")).all())
    assert sorted(said_in) == [f"Hi Isabella, message {n}" for n in range(3)]

"""A community's town as it runs, for any platform (a Discord server's, a Slack workspace's):
its admins are also the holders of the roles it names, and it runs until stopped."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from adapters.core.ports import Adapter, Caller, Reply
from bot.runtime.community_rows import CommunityRows
from bot.runtime.community_settings import TownChoices
from bot.runtime.live import run_town
from bot.runtime.run import TownRuntime
from bot.runtime.scheduler import Timekeeper
from bot.runtime.settings import Settings
from bot.runtime.towns import OpenTown, open_town
from bot.runtime.wiring import Services
from town.store.models import Community
from town.world.load import load_town

Key = TypeVar("Key")

FOUNDINGS_AT_ONCE = 8
"""Towns one process founds at once; the next founders wait their turn (their members see the
bot thinking), so a rush of foundings (a bot invited to a hundred servers in an hour) leaves the
event loop free to acknowledge every interaction within Discord's 3 seconds and to keep the
living towns' ticks on time."""


def foundings() -> asyncio.Semaphore:
    return asyncio.Semaphore(FOUNDINGS_AT_ONCE)


async def found(
    rows: CommunityRows,
    founding: set[str],
    settings: Settings,
    services: Services,
    community: tuple[str, str],
    persona: str,
) -> tuple[OpenTown, Community, str]:
    """The town of ``community`` (its key and name) founded from ``persona`` under a free name
    (``founding``: the lowered names of towns being founded meanwhile), and its row."""
    key, home = community
    name = rows.free_name(load_town(persona).name, home, key, founding)
    founding.add(name.lower())  # another community founding meanwhile picks another
    choices = TownChoices(persona=persona)
    try:
        opened = await open_town(
            choices.applied(settings), name, persona=persona, create=True, services=services
        )
    finally:
        founding.discard(name.lower())
    assert opened.town.id is not None
    return opened, rows.add(key, home, opened.town.id, choices.stored()), name


@dataclass
class CommunityTown(TownRuntime):
    """A community's town: its admins are also the holders of the roles it names."""

    community_id: int = 0
    admin_roles: frozenset[str] = frozenset()

    async def command(self, caller: Caller, line: str) -> Reply:
        if not caller.is_admin and self.admin_roles & set(caller.roles):
            caller = replace(caller, is_admin=True)
        return await super().command(caller, line)


@dataclass
class RunningTown:
    runtime: CommunityTown
    task: asyncio.Task[None]


async def start_town(
    running: dict[Key, RunningTown],
    key: Key,
    runtime: CommunityTown,
    platform: str,
    *,
    keeper: Timekeeper,
    make_adapter: Callable[[TownRuntime], Adapter],
    ready: Callable[[TownRuntime], None] | None = None,
) -> None:
    """Run the town on ``platform`` as ``running[key]`` until its task is cancelled; returns
    once it is up (raises what stopped it first)."""
    up = asyncio.Event()

    def started(town: TownRuntime) -> None:
        up.set()
        if ready is not None:
            ready(town)

    task = asyncio.create_task(
        run_town(
            runtime,
            [platform],
            ready=started,
            keeper=keeper,
            make_adapter=lambda name, rt: make_adapter(rt),
        ),
        name=f"town {key}",
    )
    running[key] = RunningTown(runtime, task)
    waiting = asyncio.create_task(up.wait())
    await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if task.done():
        running.pop(key, None)
        task.result()  # what stopped it, raised


def wanted_persona(line: str, offered: list[str]) -> str | Reply | None:
    """``[/town] found [persona]``: the persona founded from (the first offered by default),
    or the answer refusing one not offered; None for any other line (``/town`` in a
    community with no town says how to found one)."""
    try:
        words = shlex.split(line.strip().removeprefix("/"))
    except ValueError:
        words = []
    if words[:1] == ["town"]:
        words = words[1:]
    if not words or words[0].lower() != "found":
        return None
    chosen = words[1] if len(words) > 1 else offered[0]
    persona = next((p for p in offered if p.lower() == chosen.lower()), None)
    if persona is None:
        return Reply(f"No persona {chosen!r} here; choose from: {', '.join(offered)}.", True, False)
    return persona

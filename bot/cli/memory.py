"""Shell access to a resident's memory stream: ``bottown remember`` and ``bottown recall``."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from bot.cli.common import guarded, out, settings_and_logging
from bot.runtime.settings import Settings
from bot.runtime.wiring import Services, build_brain
from town.llm.schemas import RateImportanceInput
from town.llm.tasks import RATE_IMPORTANCE
from town.memory.stream import NewMemory, Retrieved
from town.store.models import Memory


async def add_memory(
    settings: Settings,
    town_name: str,
    resident_name: str,
    text: str,
    kind: str,
    importance: int | None,
) -> Memory:
    services = Services.open(settings)
    try:
        town = services.town(town_name)
        resident = services.resident(town, resident_name)
        assert town.id is not None and resident.id is not None
        if importance is None:
            brain, _handles, usage = build_brain(settings, services.store, town.id)
            rated = await brain.run(
                RATE_IMPORTANCE,
                RateImportanceInput(resident=resident.name, observations=[text]),
                resident=resident.name,
            )
            usage.flush()
            importance = rated.scores[0]
        with services.store.session() as s:
            (memory,) = services.stream(resident.id).add(
                s, [NewMemory(kind, text, importance)], town.clock
            )
        return memory
    finally:
        services.close()  # the index write too, before the process ends


def recall_memories(
    settings: Settings, town_name: str, resident_name: str, query: str, k: int
) -> list[Retrieved]:
    services = Services.open(settings)
    try:
        town = services.town(town_name)
        resident = services.resident(town, resident_name)
        assert resident.id is not None
        with services.store.session() as s:
            return services.stream(resident.id).retrieve(s, query, town.clock, k=k)
    finally:
        services.close()


def remember(
    resident: Annotated[str, typer.Argument(help="Resident's name.")],
    text: Annotated[str, typer.Argument(help="What the resident remembers.")],
    town: Annotated[str, typer.Option(help="Town name.")] = "smallville",
    kind: Annotated[
        str, typer.Option(help="seed, observation, chat, plan, reflection, directive.")
    ] = "observation",
    importance: Annotated[
        int | None, typer.Option(min=1, max=10, help="1-10; default: ask the brain.")
    ] = None,
) -> None:
    """Add one memory to a resident's stream."""

    def run() -> None:
        settings = settings_and_logging()
        memory = asyncio.run(add_memory(settings, town, resident, text, kind, importance))
        out.print(
            f"remembered #{memory.id} (importance {memory.importance}): {memory.text}",
            markup=False,
        )

    guarded(run)


def recall(
    resident: Annotated[str, typer.Argument(help="Resident's name.")],
    query: Annotated[str, typer.Argument(help="What to retrieve memories about.")],
    town: Annotated[str, typer.Option(help="Town name.")] = "smallville",
    k: Annotated[int, typer.Option(min=1, max=200, help="How many memories.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """Retrieve a resident's memories with the paper's score (recency, importance, relevance)."""

    def run() -> None:
        settings = settings_and_logging()
        found = recall_memories(settings, town, resident, query, k)
        if as_json:
            for r in found:
                out.print_json(
                    json.dumps(
                        {
                            "id": r.memory.id,
                            "kind": r.memory.kind,
                            "text": r.memory.text,
                            "score": r.score,
                            "recency": r.recency,
                            "importance": r.importance,
                            "relevance": r.relevance,
                        }
                    )
                )
            return
        table = Table(
            "#", "kind", "score", "rec", "imp", "rel", "memory", title=f"{resident}: {query}"
        )
        for r in found:
            table.add_row(
                str(r.memory.id),
                r.memory.kind,
                f"{r.score:.3f}",
                f"{r.recency:.2f}",
                f"{r.importance:.2f}",
                f"{r.relevance:.2f}",
                Text(r.memory.text),
            )
        out.print(table)

    guarded(run)

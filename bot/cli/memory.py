"""Shell access to a resident's memory stream: ``bottown remember`` and ``bottown recall``."""

from __future__ import annotations

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
        town = services.town(town_name, create=True)
        resident = services.resident(town, resident_name, create=True)
        assert town.id is not None and resident.id is not None
        if importance is None:
            brain, usage = build_brain(settings, services.store, town.id)
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

"""The town's map and its residents' cards as the page's JSON: each area a block on a grid (where
``town.toml`` puts it, else laid out here), each resident on the area the store says."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from town.views.card import MapPlace, Present, Remembered, ResidentCard, TownMap


def layout(places: Iterable[MapPlace]) -> list[dict[str, Any]]:
    """Each place with its box on the grid (x, y, w, h in cells). Places without a box from the
    town file fill rows below the placed ones, in the file's order, in a near-square grid."""
    places = list(places)
    placed = [p for p in places if p.box is not None]
    loose = [p for p in places if p.box is None]
    width = max((p.box.x + p.box.w for p in placed if p.box), default=0)
    columns = width or max(1, math.ceil(math.sqrt(len(loose))))
    top = max((p.box.y + p.box.h for p in placed if p.box), default=0)
    boxes: dict[str, tuple[int, int, int, int]] = {}
    for p in placed:
        assert p.box is not None
        boxes[p.name] = (p.box.x, p.box.y, p.box.w, p.box.h)
    for n, p in enumerate(loose):
        boxes[p.name] = (n % columns, top + n // columns, 1, 1)
    return [
        {
            "name": p.name,
            "description": p.description,
            **dict(zip("xywh", boxes[p.name], strict=True)),
        }
        for p in places
    ]


def map_json(town: TownMap) -> dict[str, Any]:
    return {
        "clock": town.clock.isoformat(),
        "places": layout(town.places),
        "residents": [present_json(r) for r in town.residents],
    }


def present_json(who: Present) -> dict[str, Any]:
    return {
        "name": who.name,
        "avatar": who.avatar,
        "area": who.area,
        "action": who.action,
        "action_emoji": who.action_emoji,
        "awake": who.awake,
    }


def card_json(card: ResidentCard) -> dict[str, Any]:
    return {
        **present_json(card.who),
        "occupation": card.occupation,
        "age": card.age,
        "about": card.about,
        "summary": card.summary,
        "plan": [
            {
                "start": _clock(line.start),
                "minutes": line.minutes,
                "description": line.description,
                "location": line.location,
            }
            for line in card.plan
        ],
        "memories": [_memory_json(m) for m in card.memories],
        "reflections": [_memory_json(m) for m in card.reflections],
        "people": [{"name": p.name, "avatar": p.avatar, "how": p.how} for p in card.people],
    }


def _memory_json(memory: Remembered) -> dict[str, Any]:
    return {
        "when": f"{memory.created:%a %H:%M}",
        "kind": memory.kind,
        "text": memory.text,
        "importance": memory.importance,
    }


def _clock(at: datetime) -> str:
    return f"{at:%H:%M}"

"""Places with a handler of their own: a feature plugs one in for an area of a town (the mock
interview, for its interview rooms), and a visitor's words there reach it before small talk.

The handlers are kept per town: per store and town id, so two engines over one town share them.
"""

from __future__ import annotations

from typing import Protocol
from weakref import WeakKeyDictionary

from town.inputs.visit import Visit
from town.outbox.events import TownEvent
from town.store.db import Store
from town.tick.engine import Engine
from town.tick.turn import Tick

__all__ = ["PlaceHandler", "Visit", "handle_place", "place_handlers"]


class PlaceHandler(Protocol):
    async def __call__(self, tick: Tick, visit: Visit) -> TownEvent | None:
        """A resident's answer (an event of ``tick``), said instead of small talk: that resident
        does not hear the visit as an observation too. None: the place is ordinary now.

        ``tick`` is a snapshot, thinking (``town.inputs.placed``): the handler reads what it
        needs from it (rows, states, memory arrays) and queries nothing; what it changes in
        the residents' states and records in their streams is written after its LLM calls."""
        ...


_HANDLERS: WeakKeyDictionary[Store, dict[int, dict[str, PlaceHandler]]] = WeakKeyDictionary()


def handle_place(engine: Engine, area: str, handler: PlaceHandler) -> None:
    """Give ``area`` of the engine's town a handler (replacing any it had)."""
    towns = _HANDLERS.setdefault(engine.store, {})
    towns.setdefault(engine.town_id, {})[area.casefold()] = handler


def place_handlers(engine: Engine) -> dict[str, PlaceHandler]:
    """The handlers of the engine's town, by area (case-folded)."""
    return _HANDLERS.get(engine.store, {}).get(engine.town_id, {})

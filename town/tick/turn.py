"""What one turn of the town (a tick) shares among the residents thinking in it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sqlmodel import Session

from town.llm.port import Brain
from town.memory.stream import MemoryStream
from town.outbox.events import TownEvent
from town.store.models import Resident
from town.tick.state import ResidentState
from town.world.persona import ResidentSpec
from town.world.places import World


@dataclass
class Tick:
    """Everything one tick shares among the residents thinking in it."""

    session: Session
    now: datetime
    world: World
    brain: Brain
    streams: Callable[[int], MemoryStream]
    residents: dict[str, Resident]
    specs: dict[str, ResidentSpec]
    start: dict[str, tuple[str, str, bool]] = field(default_factory=dict)  # location, action, awake
    events: list[TownEvent] = field(default_factory=list)
    # talks asked for this tick: (urged by an input, who, to whom); begun in the engine's order
    talks: list[tuple[bool, str, str]] = field(default_factory=list)
    states: dict[str, ResidentState] = field(default_factory=dict)
    _present: dict[str, list[tuple[str, str, bool]]] | None = field(default=None, repr=False)

    def state(self, resident: Resident) -> ResidentState:
        """The resident's state for this tick: one object shared by every unit of work that
        touches the resident, written back to the row by ``save_states``."""
        found = self.states.get(resident.name)
        if found is None:
            found = self.states[resident.name] = ResidentState.of(resident)
        return found

    def present(self, area: str) -> list[tuple[str, str, bool]]:
        """Who was in ``area`` when the tick began: (name, action, awake), in the residents'
        order."""
        if self._present is None:
            self._present = {}
            for name, (location, action, awake) in self.start.items():
                self._present.setdefault(World.area_of(location), []).append((name, action, awake))
        return self._present.get(area, [])

    def save_states(self) -> None:
        """Write each resident's state back to its row."""
        for name, state in self.states.items():
            row = self.residents[name]
            if state.save(row):
                self.session.add(row)

    def emit(self, kind: str, resident: Resident, text: str = "", **data: object) -> None:
        channel = World.area_of(resident.location)
        self.events.append(TownEvent(kind, channel, self.now, resident.name, text, dict(data)))

    def stream(self, resident: Resident) -> MemoryStream:
        assert resident.id is not None
        return self.streams(resident.id)

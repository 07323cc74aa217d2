"""What one turn of the town (a tick) shares among the residents thinking in it.

A tick thinks from what it read before (its snapshot: the residents, the world, today's plan
items, the conversations going on, the memory arrays) and with no query of the store: what it
adds (memories, plan items, conversations) waits in its session, with ids made in Python; what it
changes otherwise (plan items dropped, an object's state) waits in ``writes``, run at its commit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import delete, inspect
from sqlmodel import Session, col

from town.llm.chain import Handles
from town.llm.port import Brain
from town.memory.stream import MemoryStream
from town.outbox.events import TownEvent
from town.store.models import Conversation, PlanItem, Resident
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
    llm: Handles = field(default_factory=Handles)  # the brain's handles (pace, server)
    # today's plan items of each resident (by id), and the conversations going on, as read
    plans: dict[int, list[PlanItem]] = field(default_factory=dict)
    conversations: dict[int, Conversation] = field(default_factory=dict)
    # what the tick writes at its commit besides the rows in its session
    writes: list[Callable[[Session], None]] = field(default_factory=list)
    begun: int = 0  # wake-ups and reflections begun this tick (see town/tick/mind.py)
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

    def plan_items(self, resident: Resident) -> list[PlanItem]:
        """The resident's plan items for today, as read and as added by this tick."""
        assert resident.id is not None
        return self.plans.setdefault(resident.id, [])

    def plan_item(self, item_id: int) -> PlanItem | None:
        """One of today's plan items by id, if there is one."""
        return next(
            (item for items in self.plans.values() for item in items if item.id == item_id), None
        )

    def drop_plan_items(self, resident: Resident, gone: set[int]) -> None:
        """Drop the resident's plan items ``gone`` (those added by this tick never reach the
        store; those read are deleted at the commit, the ones under them first)."""
        items = self.plan_items(resident)
        stored = {i.id for i in items if i.id in gone and inspect(i).persistent}
        for item in items:
            if item.id in gone and inspect(item).session is not None:
                self.session.expunge(item)
        items[:] = [i for i in items if i.id not in gone]
        if stored:
            self.writes.append(lambda session: delete_plan_items(session, stored))

    def emit(self, kind: str, resident: Resident, text: str = "", **data: object) -> None:
        channel = World.area_of(resident.location)
        self.events.append(TownEvent(kind, channel, self.now, resident.name, text, dict(data)))

    def stream(self, resident: Resident) -> MemoryStream:
        assert resident.id is not None
        return self.streams(resident.id)


def delete_plan_items(session: Session, ids: set[int]) -> None:
    """Delete plan items, those under them first (a parent's row is referenced by theirs)."""
    session.execute(delete(PlanItem).where(col(PlanItem.parent_id).in_(ids)))
    session.execute(delete(PlanItem).where(col(PlanItem.id).in_(ids)))

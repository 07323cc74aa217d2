"""Pending inputs: what an input wrote at once, in a short transaction of its own, for the
residents to take in at their next tick (``PendingInput`` rows, in the order written).

- ``whisper``: an inner voice (the resident's inbox and its directive).
- ``observed``: words the resident perceives (in its inbox): a visitor's at a place with a handler,
  a member's reaction to what the resident said.
- ``changed``: what an input that thought apart (an interview room's handler) changed of the
  resident: whole fields of its state, its record of each candidate (``coaching``), its action
  and emoji (a :class:`Change`, as JSON). The input leaves the resident's row alone, so a tick
  thinking meanwhile is never made to think again.

The rule: a tick takes in the pending inputs its snapshot read, and deletes them at its commit;
one written after that read waits for the next tick. Whoever reads a resident's state between
(the handler's next answer, ``feedback``) reads the row with the changes on top, in order
(:func:`changes_on_top`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import delete
from sqlalchemy.orm.attributes import flag_modified, set_committed_value
from sqlmodel import Session, col, select

from town.store.models import PendingInput, Resident
from town.tick.state import Candidate, ResidentState
from town.tick.turn import Tick

WHISPER = "whisper"
OBSERVED = "observed"  # a pending input the resident perceives, as words in its inbox
CHANGED = "changed"  # a Change to the resident made by an input that thought apart


class Change(BaseModel):
    """What an input changed of one resident, to be put on top of its row as it is then."""

    state: dict[str, Any] = Field(default_factory=dict)  # whole fields (coaching apart)
    coaching: dict[str, Candidate] = Field(default_factory=dict)  # candidate by candidate
    action: str | None = None
    emoji: str | None = None

    @classmethod
    def between(
        cls,
        was: ResidentState,
        thought: ResidentState,
        *,
        action: str | None = None,
        emoji: str | None = None,
    ) -> Change:
        """What changed from ``was`` to ``thought``: whole fields, and candidate by candidate
        in ``coaching``; ``action`` and ``emoji``, the row's new ones (None: unchanged)."""
        dumped, before = thought.model_dump(mode="json"), was.model_dump(mode="json")
        fields = {k: v for k, v in dumped.items() if before[k] != v and k != "coaching"}
        coaching = {k: c for k, c in thought.coaching.items() if was.coaching.get(k) != c}
        return cls(state=fields, coaching=coaching, action=action, emoji=emoji)

    def __bool__(self) -> bool:
        changed = (self.action, self.emoji) != (None, None)
        return changed or bool(self.state or self.coaching)

    def on(self, state: ResidentState) -> ResidentState:
        """``state`` with this change on top."""
        fields = {**state.model_dump(mode="json"), **self.state}
        fields["coaching"] = {**fields["coaching"], **self.model_dump(mode="json")["coaching"]}
        return ResidentState.model_validate(fields)

    def put_on(self, tick: Tick, row: Resident) -> None:
        """Onto the tick's state of ``row`` and onto its row, as the tick began (the row's
        values as if read: a snapshot writes nothing)."""
        tick.states[row.name] = self.on(tick.state(row))
        for name, value in (("action", self.action), ("emoji", self.emoji)):
            if value is not None:
                set_committed_value(row, name, value)
        if row.name in tick.start:
            location, _, awake = tick.start[row.name]
            tick.start[row.name] = (location, row.action, awake)


def waiting(session: Session, town_id: int, *kinds: str) -> list[PendingInput]:
    """The pending inputs of the town (of ``kinds``, if given), in the order written."""
    query = select(PendingInput).where(PendingInput.town_id == town_id)
    if kinds:
        query = query.where(col(PendingInput.kind).in_(kinds))
    return list(session.exec(query.order_by(col(PendingInput.id))).all())


def changes_on_top(tick: Tick, town_id: int) -> None:
    """The changes waiting for the next tick put on the tick's residents, in order: a reader's
    snapshot (the rows as committed, and what inputs changed since)."""
    for row in waiting(tick.session, town_id, CHANGED):
        _change(tick, row)


def state_with_changes(session: Session, row: Resident) -> ResidentState:
    """The resident's state as committed, with the changes still pending on top, in order."""
    state = ResidentState.of(row)
    for pending in waiting(session, row.town_id, CHANGED):
        if pending.resident == row.name:
            state = Change.model_validate_json(pending.text).on(state)
    return state


def take_pending(tick: Tick, town_id: int) -> None:
    """Inputs waiting for this tick (an inner voice, something observed, a change) into the
    residents' states; deleted at its commit. One written after this read waits for the next
    tick."""
    rows = waiting(tick.session, town_id)
    changed: list[Resident] = []
    for row in rows:
        resident = tick.residents.get(row.resident)
        if resident is None:
            continue
        if row.kind == WHISPER:
            state = tick.state(resident)
            state.inbox.append(f"Inner voice: {row.text}")
            state.directive = row.text
        elif row.kind == OBSERVED:  # (a member's reaction to what the resident said)
            tick.state(resident).inbox.append(row.text)
        elif row.kind == CHANGED:
            _change(tick, row)
            changed.append(resident)
    taken = [row.id for row in rows if row.id is not None]
    if taken:

        def delete_taken(session: Session) -> None:
            for resident in changed:  # (its action and emoji as the tick leaves them)
                flag_modified(resident, "action")
                flag_modified(resident, "emoji")
            session.execute(delete(PendingInput).where(col(PendingInput.id).in_(taken)))

        tick.writes.append(delete_taken)


def _change(tick: Tick, pending: PendingInput) -> None:
    resident = tick.residents.get(pending.resident)
    if resident is not None:
        Change.model_validate_json(pending.text).put_on(tick, resident)

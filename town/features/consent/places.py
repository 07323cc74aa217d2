"""Every place a member's data lives, in one registry: how to find what holds the member, and
how to erase or redact it. ``forget`` walks ``REGISTRY`` in order: the store's places in one
transaction, then the places outside the store (the vector index, the replay files).

A new table that keeps what members say is one more entry here (``Rows`` for a table whose
rows go with the member, ``Redacted`` for one whose rows stay with the member taken out)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import String, Text, and_
from sqlmodel import Session, SQLModel, col, select

from town.features.consent.member import FORGOTTEN, GONE, Member
from town.features.ratings.reactions import pseudonym
from town.outbox.chatlog import thread_of
from town.outbox.replays import replay_parts
from town.store.models import (
    AuditEntry,
    ChatLine,
    Conversation,
    Memory,
    OutboxEvent,
    PendingInput,
    PlanItem,
    Reaction,
    Resident,
    Visitor,
    WaitingInput,
)

FORGOTTEN_KIND = "forgotten"  # an audit row of a forgotten member's: counted, never heard


@dataclass
class Scope:
    """Where a forget looks: the town, its store session (None for the places outside it),
    the vector index's collection and its ids (``VectorPlace``), and the replay files."""

    town_id: int
    session: Session | None = None
    vectors: Vectors | None = None
    replays: Sequence[Path] = ()
    erased_memories: set[int] = field(default_factory=set)  # what the store's places deleted

    @property
    def db(self) -> Session:
        assert self.session is not None, "a store place needs the forget's session"
        return self.session

    def resident_ids(self) -> list[int]:
        rows = self.db.exec(select(Resident.id).where(Resident.town_id == self.town_id))
        return [r for r in rows if r is not None]


class Vectors(Protocol):
    """The town's vectors as a forget needs them (``town.memory.vectors.VectorIndex``)."""

    def ids(self) -> list[int]: ...
    def delete(self, ids: Sequence[int]) -> None: ...


class Place(Protocol):
    name: str
    in_store: bool  # erased in the forget's transaction; else after it commits

    def find(self, scope: Scope, member: Member) -> int:
        """How many rows (memories, vectors, lines) hold the member."""
        ...

    def erase(self, scope: Scope, member: Member) -> int:
        """Erase or redact them; how many were."""
        ...


@dataclass
class Rows:
    """A table's rows that are the member's own (``mine``: the condition that picks them):
    deleted."""

    name: str
    model: type[SQLModel]
    mine: Callable[[Scope, Member], Any]
    in_store: bool = True

    def _rows(self, scope: Scope, member: Member) -> list[Any]:
        return list(scope.db.exec(select(self.model).where(self.mine(scope, member))))

    def find(self, scope: Scope, member: Member) -> int:
        return len(self._rows(scope, member))

    def erase(self, scope: Scope, member: Member) -> int:
        rows = self._rows(scope, member)
        for row in rows:
            scope.db.delete(row)
        return len(rows)


def _visitor_of(scope: Scope, member: Member) -> Any:
    return and_(
        col(Visitor.town_id) == scope.town_id,
        col(Visitor.platform) == member.platform,
        col(Visitor.platform_user_id) == member.user_id,
    )


def _chat_of(scope: Scope, member: Member) -> Any:
    """The member's chats: their words, the answers to them, the town's word to them."""
    return and_(
        col(ChatLine.town_id) == scope.town_id,
        col(ChatLine.thread) == thread_of(member.platform, member.user_id),
    )


def _reactions_of(scope: Scope, member: Member) -> Any:
    """The member's reactions (kept under a pseudonym of their id)."""
    return and_(
        col(Reaction.town_id) == scope.town_id,
        col(Reaction.member) == pseudonym(scope.town_id, member.platform, member.user_id),
    )


@dataclass
class AuditRows:
    """The audit log: the member's own rows kept as "forgotten visitor" rows (so counts stay
    true) with no text; others' rows that name or quote them redacted."""

    name: str = "audit log"
    in_store: bool = True

    def _own(self, scope: Scope, member: Member) -> list[AuditEntry]:
        return list(
            scope.db.exec(
                select(AuditEntry).where(
                    AuditEntry.town_id == scope.town_id,
                    col(AuditEntry.who).endswith(member.logged_as, autoescape=True),
                )
            )
        )

    def _naming(self, scope: Scope, member: Member) -> list[AuditEntry]:
        found: dict[int, AuditEntry] = {}
        for column in (AuditEntry.text, AuditEntry.who):
            for sieve in member.where_held(column):
                query = select(AuditEntry).where(AuditEntry.town_id == scope.town_id, sieve)
                found.update((r.id or 0, r) for r in scope.db.exec(query))
        return [
            r
            for r in found.values()
            if not r.who.endswith(member.logged_as)
            and (member.held_in(r.text) or member.held_in(r.who))
        ]

    def find(self, scope: Scope, member: Member) -> int:
        return len(self._own(scope, member)) + len(self._naming(scope, member))

    def erase(self, scope: Scope, member: Member) -> int:
        own, naming = self._own(scope, member), self._naming(scope, member)
        for row in own:
            row.who, row.text, row.kind = FORGOTTEN, GONE, FORGOTTEN_KIND
            scope.db.add(row)
        for row in naming:
            row.who, row.text = member.redact(row.who), member.redact(row.text)
            scope.db.add(row)
        return len(own) + len(naming)


@dataclass
class Memories:
    """Residents' memories that hold or quote the member (observations, chat memories, any
    other): deleted; a reflection citing only deleted memories goes too, one citing others
    keeps the others; a plan step's link to a deleted memory is cut."""

    name: str = "memories"
    in_store: bool = True

    def _held(self, scope: Scope, member: Member) -> dict[int, Memory]:
        ids = scope.resident_ids()
        found: dict[int, Memory] = {}
        for sieve in member.where_held(Memory.text):
            query = select(Memory).where(col(Memory.resident_id).in_(ids), sieve)
            found.update((m.id or 0, m) for m in scope.db.exec(query) if member.held_in(m.text))
        return found

    def find(self, scope: Scope, member: Member) -> int:
        return len(self._held(scope, member))

    def erase(self, scope: Scope, member: Member) -> int:
        held = self._held(scope, member)
        query = select(Memory).where(
            col(Memory.resident_id).in_(scope.resident_ids()), Memory.kind == "reflection"
        )
        reflections = [r for r in scope.db.exec(query) if r.cites and r.id not in held]
        gone = set(held)
        changed = True
        while changed:  # a reflection on reflections that went goes too
            changed = False
            for m in reflections:
                if m.id not in gone and set(m.cites) <= gone:
                    gone.add(m.id or 0)
                    changed = True
        for m in [*held.values(), *(r for r in reflections if r.id in gone)]:
            scope.db.delete(m)
        for m in reflections:
            if m.id not in gone and set(m.cites) & gone:
                m.cites = [c for c in m.cites if c not in gone]
                scope.db.add(m)
        if gone:
            plans = scope.db.exec(select(PlanItem).where(col(PlanItem.memory_id).in_(gone)))
            for plan in plans:
                plan.memory_id = None
                scope.db.add(plan)
        scope.erased_memories |= gone
        return len(gone)


@dataclass
class Redacted:
    """Rows of a table that stay, with the member's names and words taken out of their text
    and JSON fields (``belongs``: which rows are the town's)."""

    name: str
    model: type[SQLModel]
    fields: tuple[str, ...]
    belongs: Callable[[Scope], Any]
    in_store: bool = True

    def _rows(self, scope: Scope, member: Member) -> list[Any]:
        found: dict[Any, Any] = {}
        for name in self.fields:
            column = getattr(self.model, name)
            as_json = not isinstance(column.type, (String, Text))
            for sieve in member.where_held(column, as_json=as_json):
                query = select(self.model).where(self.belongs(scope), sieve)
                found.update((id(r), r) for r in scope.db.exec(query))
        return [
            r
            for r in found.values()
            if any(member.held_in_json(getattr(r, f)) for f in self.fields)
        ]

    def find(self, scope: Scope, member: Member) -> int:
        return len(self._rows(scope, member))

    def erase(self, scope: Scope, member: Member) -> int:
        rows = self._rows(scope, member)
        for row in rows:
            for f in self.fields:
                setattr(row, f, member.redact_json(getattr(row, f)))
            scope.db.add(row)
        return len(rows)


@dataclass
class VectorPlace:
    """The vector index: every vector whose memory no longer is (those the store's places just
    deleted, and any a forget a crash cut short left behind)."""

    name: str = "vectors"
    in_store: bool = False
    alive: Callable[[Scope, list[int]], set[int]] | None = None

    def _orphans(self, scope: Scope) -> list[int]:
        if scope.vectors is None or self.alive is None:
            return []
        ids = scope.vectors.ids()
        kept = self.alive(scope, ids)
        return [i for i in ids if i not in kept]

    def find(self, scope: Scope, member: Member) -> int:
        return len(self._orphans(scope))

    def erase(self, scope: Scope, member: Member) -> int:
        orphans = self._orphans(scope)
        if orphans and scope.vectors is not None:
            scope.vectors.delete(orphans)
        return len(orphans)


@dataclass
class ReplayLines:
    """Replay files (JSON lines): each line that holds the member rewritten without them."""

    name: str = "replays"
    in_store: bool = False

    def find(self, scope: Scope, member: Member) -> int:
        return sum(
            1
            for path in _files(scope.replays)
            for line in path.read_text(encoding="utf-8").splitlines()
            if member.held_in(line)
        )

    def erase(self, scope: Scope, member: Member) -> int:
        count = 0
        for path in _files(scope.replays):
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
            held = [member.held_in(line) for line in lines]
            if not any(held):
                continue
            count += sum(held)
            kept = "".join(
                member.redact(line) if h else line for line, h in zip(lines, held, strict=True)
            )
            fresh = path.with_name(path.name + ".forget")
            fresh.write_text(kept, encoding="utf-8")
            fresh.replace(path)  # whole or not at all
        return count


def _files(paths: Sequence[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(path.glob("*.jsonl")))
        else:  # a replay's file, and its past days' files
            found.extend(replay_parts(path))
    return found


def _memory_ids_alive(scope: Scope, ids: list[int]) -> set[int]:
    assert scope.session is not None
    alive: set[int] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        alive |= {
            i for i in scope.session.exec(select(Memory.id).where(col(Memory.id).in_(chunk))) if i
        }
    return alive


def _town_rows(model: Any) -> Callable[[Scope], Any]:
    return lambda scope: model.town_id == scope.town_id


def _residents_rows(model: Any) -> Callable[[Scope], Any]:
    return lambda scope: col(model.resident_id).in_(scope.resident_ids())


REGISTRY: list[Place] = [
    Rows("visitors", Visitor, _visitor_of),
    Rows("chat lines", ChatLine, _chat_of),
    Rows("reactions", Reaction, _reactions_of),
    AuditRows(),
    Memories(),
    Redacted("residents", Resident, ("summary", "action", "state"), _town_rows(Resident)),
    # (words heard and an interview room's changes, waiting for the next tick)
    Redacted("pending inputs", PendingInput, ("text",), _town_rows(PendingInput)),
    # (a visitor's words and reactions a gateway process heard, for the town's process)
    Redacted("waiting inputs", WaitingInput, ("body",), _town_rows(WaitingInput)),
    Redacted("plans", PlanItem, ("description",), _residents_rows(PlanItem)),
    Redacted("conversations", Conversation, ("participants", "turns"), _town_rows(Conversation)),
    Redacted("outbox", OutboxEvent, ("payload",), _town_rows(OutboxEvent)),
    Redacted(
        "others' chat lines", ChatLine, ("speaker", "addressee", "text"), _town_rows(ChatLine)
    ),
    VectorPlace(alive=_memory_ids_alive),
    ReplayLines(),
]

"""Forgetting a member: ``forget`` finds who is meant, records a ``ForgetOrder`` (committed
before anything is erased, so a forget a crash interrupts finishes on the next start:
``finish_pending``), walks every place of ``places.REGISTRY``, and closes the order. The audit
log then records that a forget happened, never whom or what."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import func
from sqlmodel import Session, col, select

from town.features.consent.member import FORGOTTEN, Member
from town.features.consent.places import REGISTRY, Place, Scope
from town.inputs.consent import hold_member
from town.inputs.naming import MARKER
from town.inputs.unit import input_unit
from town.memory.embedding_queue import flush_queues
from town.outbox import audit
from town.outbox.chatlog import VISITOR, thread_of
from town.store.models import (
    AuditEntry,
    ChatLine,
    ForgetOrder,
    MutedMember,
    Resident,
    Visitor,
)
from town.text import clean_text
from town.tick.engine import Engine

log = logging.getLogger(__name__)

FORGET_KIND = "forget"
REASONS = ("asked", "admin", "ban", "kick", "leave")
FLUSH_S = 60.0  # at most this long for the embedding thread's pending index writes
SPOKEN = ("say", "say:limited", "say:place", "say:muted")  # audit kinds of a member's words


class UnknownMember(LookupError):
    """Nobody the town knows goes by that name or id."""


@dataclass(frozen=True)
class Forgotten:
    erased: dict[str, int]  # per place of the registry, what was erased or redacted

    @property
    def total(self) -> int:
        return sum(self.erased.values())


def find_members(session: Session, town_id: int, who: str) -> list[tuple[str, str]]:
    """The (platform, user id) pairs ``who`` stands for: ``discord:1234``, a mention
    (``<@1234>``, ``<@U0ABC|alice>``), or a name a visitor went by (any case, marker or not,
    ``@`` or not)."""
    wanted = who.strip()
    mention = wanted.removeprefix("<@").removeprefix("!").removesuffix(">").partition("|")[0]
    if wanted.startswith("<@") and mention:
        rows = session.exec(
            select(Visitor.platform, Visitor.platform_user_id).where(
                Visitor.town_id == town_id, Visitor.platform_user_id == mention
            )
        )
        return sorted(set(rows))
    platform, colon, user = wanted.partition(":")
    if (
        colon
        and platform
        and user
        and " " not in platform
        and _known(session, town_id, platform, user)
    ):
        return [(platform, user)]
    folded = wanted.removeprefix("@").removesuffix(MARKER).strip().strip('"').casefold()
    found = {
        (v.platform, v.platform_user_id)
        for v in session.exec(select(Visitor).where(Visitor.town_id == town_id))
        if v.display_name.removesuffix(MARKER).strip().strip('"').casefold() == folded
    }
    for row in session.exec(
        select(AuditEntry.who).where(
            AuditEntry.town_id == town_id, AuditEntry.direction == audit.IN
        )
    ):
        name, _, tail = row.rpartition(" (")
        if name.removesuffix(MARKER).strip().strip('"').casefold() == folded and ":" in tail:
            where, _, uid = tail.removesuffix(")").partition(":")
            found.add((where, uid))
    return sorted(found)


def characters_of(session: Session, town_id: int, platform: str, user_id: str) -> list[str]:
    """The ids the member's words were also heard under: a Discord member writing through a
    proxy bot (PluralKit, Tupperbox) is a visitor per character, ``<user id>:<character>``."""
    rows = session.exec(
        select(Visitor.platform_user_id).where(
            Visitor.town_id == town_id,
            Visitor.platform == platform,
            col(Visitor.platform_user_id).startswith(f"{user_id}:", autoescape=True),
        )
    )
    return sorted(set(rows))


def _known(session: Session, town_id: int, platform: str, user_id: str) -> bool:
    member = Member(platform, user_id)
    visitor = session.exec(
        select(Visitor.id).where(
            Visitor.town_id == town_id,
            Visitor.platform == platform,
            Visitor.platform_user_id == user_id,
        )
    ).first()
    said = session.exec(
        select(AuditEntry.id).where(
            AuditEntry.town_id == town_id,
            col(AuditEntry.who).endswith(member.logged_as, autoescape=True),
        )
    ).first()
    return visitor is not None or said is not None


def member_of(session: Session, town_id: int, platform: str, user_id: str) -> Member:
    """The member with every name they went by and the words they said, as the store has
    them now."""
    tail = Member(platform, user_id).logged_as
    names: set[str] = set()
    visitor = session.exec(
        select(Visitor).where(
            Visitor.town_id == town_id,
            Visitor.platform == platform,
            Visitor.platform_user_id == user_id,
        )
    ).first()
    if visitor is not None:
        names.add(visitor.display_name)
    phrases: set[str] = set()
    for row in session.exec(
        select(AuditEntry).where(
            AuditEntry.town_id == town_id, col(AuditEntry.who).endswith(tail, autoescape=True)
        )
    ):
        names.add(row.who.removesuffix(tail).strip())  # (the name they went by)
        if row.kind in SPOKEN:
            phrases.add(row.text)
    for line in session.exec(
        select(ChatLine).where(
            ChatLine.town_id == town_id,
            ChatLine.thread == thread_of(platform, user_id),
            ChatLine.kind == VISITOR,
        )
    ):
        names.add(line.speaker)
        phrases.add(line.text)
    residents = set(session.exec(select(Resident.name).where(Resident.town_id == town_id)))
    names -= residents | {"someone", FORGOTTEN}  # never the residents' own names
    spared = tuple(sorted(residents))
    return Member(platform, user_id, tuple(sorted(names)), tuple(sorted(phrases)), spared)


async def forget(
    engine: Engine,
    platform: str,
    user_id: str,
    *,
    reason: str = "asked",
    names: Sequence[str] = (),
    replays: Sequence[Path] = (),
) -> Forgotten:
    """Forget one member everywhere the registry lists. ``names``: names they are known by
    beyond what the store holds (their display name now). Raises ``UnknownMember`` (and
    changes nothing) when the town holds nothing of them."""
    if reason not in REASONS:
        raise ValueError(f"reason must be one of {', '.join(REASONS)}")
    order_id = await asyncio.to_thread(
        _record_order, engine, platform, user_id, reason, list(names)
    )
    return await finish(engine, order_id, replays)


def _record_order(
    engine: Engine, platform: str, user_id: str, reason: str, names: list[str]
) -> int:
    with engine.store.session() as session:
        # an answer being written for them first commits (and is found), or waits for the order
        hold_member(session, engine.town_id, platform, user_id)
        known = member_of(session, engine.town_id, platform, user_id)
        if (
            not known.names
            and not known.phrases
            and not _known(session, engine.town_id, platform, user_id)
        ):
            raise UnknownMember("The town holds nothing of that member; nothing was changed.")
        order = ForgetOrder(
            town_id=engine.town_id,
            platform=platform[:20],
            platform_user_id=user_id[:100],
            names=sorted({*known.names, *(n for n in names if n)}),
            phrases=list(known.phrases),
            reason=reason,
        )
        session.add(order)
        session.flush()
        assert order.id is not None
        return order.id


async def finish(engine: Engine, order_id: int, replays: Sequence[Path] = ()) -> Forgotten:
    """Carry out a recorded order: the store's places in one unit of work (the engine's lock
    held, no LLM call in it), then the vectors and the replays, then the order is closed."""
    with engine.store.session() as session:
        order = session.get(ForgetOrder, order_id)
        if order is None or order.done_at is not None:
            return Forgotten({})
        known = member_of(session, engine.town_id, order.platform, order.platform_user_id)
        member = Member(
            order.platform,
            order.platform_user_id,
            tuple(sorted({*known.names, *order.names})),
            tuple(sorted({*known.phrases, *order.phrases})),
            known.spared,
        )
    erased: dict[str, int] = {}
    async with input_unit(engine) as unit:
        scope = Scope(engine.town_id, unit.session)
        for place in _places(in_store=True):
            erased[place.name] = place.erase(scope, member)
        order = unit.session.get(ForgetOrder, order_id)
        assert order is not None
        # kept until the order is closed: the audit rows they came from are redacted now
        order.names, order.phrases = sorted(member.names), sorted(member.phrases)
        unit.session.add(order)
    await asyncio.to_thread(_outside, engine, member, replays, erased)
    await asyncio.to_thread(_close, engine, order_id)
    log.info("a member was forgotten (%d rows, memories, vectors and lines)", sum(erased.values()))
    return Forgotten(erased)


def _places(*, in_store: bool) -> list[Place]:
    return [p for p in REGISTRY if p.in_store == in_store]


def _outside(
    engine: Engine, member: Member, replays: Sequence[Path], erased: dict[str, int]
) -> None:
    with engine.store.session() as session:
        residents = [
            r
            for r in session.exec(select(Resident.id).where(Resident.town_id == engine.town_id))
            if r is not None
        ]
        vectors = _TownVectors(engine, session, residents) if residents else None
        scope = Scope(engine.town_id, session, vectors, replays)
        for place in _places(in_store=False):
            erased[place.name] = place.erase(scope, member)
        for rid in residents:
            engine.streams(rid).arrays.forget()  # read again from the store on next use


class _TownVectors:
    """The town's collection of the vector index, as ``places.Vectors``."""

    def __init__(self, engine: Engine, session: Session, residents: list[int]) -> None:
        stream = engine.streams(residents[0])
        if stream.executor is not None:  # vectors still on their way in land before the sweep
            flush_queues(stream.executor, timeout=FLUSH_S)
        self.index = stream.index
        self.collection = stream.town_collection(session)

    def ids(self) -> list[int]:
        return [int(i) for i in self.index.ids(self.collection)]

    def delete(self, ids: Sequence[int]) -> None:
        self.index.delete(self.collection, ids)


def _close(engine: Engine, order_id: int) -> None:
    """The order closed, the member's identity cleared from it, the forget audited (that it
    happened, never whom), and a forgotten member's mute (nothing left to mute) gone."""
    with engine.store.session() as session:
        order = session.get(ForgetOrder, order_id)
        if order is None:
            return
        muted = session.exec(
            select(MutedMember).where(
                MutedMember.town_id == engine.town_id,
                MutedMember.platform == order.platform,
                MutedMember.platform_user_id == order.platform_user_id,
            )
        )
        for row in muted:
            session.delete(row)
        order.platform_user_id, order.done_at = "", datetime.now(UTC)
        order.names, order.phrases = [], []
        session.add(order)
        clock = engine.town(session).clock
        audit.record(
            session,
            engine.town_id,
            audit.IN,
            FORGET_KIND,
            FORGOTTEN,
            clean_text(f"a member was forgotten ({order.reason})"),
            game_time=clock,
            platform=order.platform,
        )


def forgets_done(engine: Engine) -> int:
    """The town's forget generation: the newest finished order's number (0: none yet). It
    grows the moment a forget commits, whichever process ran it; what a process keeps from
    the store (a page's feed, the memory arrays) is stale once it has grown."""
    with engine.store.session() as session:
        newest = session.exec(
            select(func.max(ForgetOrder.id)).where(
                ForgetOrder.town_id == engine.town_id, col(ForgetOrder.done_at).is_not(None)
            )
        ).one()
    return int(newest or 0)


def follow_forgets(engine: Engine, seen: int) -> int:
    """The forget generation now; if it grew past ``seen`` (a forget in another process),
    every resident's memory arrays are read again from the store on next use."""
    now = forgets_done(engine)
    if now != seen:
        with engine.store.session() as session:
            residents = session.exec(select(Resident.id).where(Resident.town_id == engine.town_id))
            for rid in [r for r in residents if r is not None]:
                engine.streams(rid).arrays.forget()
    return now


def pending_orders(engine: Engine) -> list[int]:
    with engine.store.session() as session:
        rows = session.exec(
            select(ForgetOrder.id).where(
                ForgetOrder.town_id == engine.town_id, col(ForgetOrder.done_at).is_(None)
            )
        )
        return [r for r in rows if r is not None]


async def finish_pending(engine: Engine, replays: Sequence[Path] = ()) -> int:
    """Finish the forgets a crash interrupted (on start); how many there were."""
    ids = await asyncio.to_thread(pending_orders, engine)
    for order_id in ids:
        await finish(engine, order_id, replays)
    return len(ids)

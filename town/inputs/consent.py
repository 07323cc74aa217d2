"""A member's say over what the residents hear of them: ``mute`` (the residents neither hear nor
answer them; their messages are audited as received and nothing else is kept) and ``unmute``;
and, at a place an admin closed, words heard but not answered. ``muted_words`` and ``closed_at``
are the calls the visitor path makes (``town.inputs.visitor.say``)."""

from __future__ import annotations

from sqlalchemy import update
from sqlmodel import Session, col, select

from town.inputs.naming import visitor_name
from town.inputs.unit import area_named
from town.inputs.visit import Visit
from town.outbox import audit
from town.outbox.switches import CLOSED, switches
from town.store.models import ForgetOrder, MutedMember, Visitor
from town.tick.engine import Engine
from town.world.places import World

MUTED = "say:muted"


def is_muted(session: Session, town_id: int, platform: str, user_id: str) -> bool:
    """Whether the member asked the residents not to hear them."""
    return _row(session, town_id, platform, user_id) is not None


def _row(session: Session, town_id: int, platform: str, user_id: str) -> MutedMember | None:
    return session.exec(
        select(MutedMember).where(
            MutedMember.town_id == town_id,
            MutedMember.platform == platform,
            MutedMember.platform_user_id == user_id[:100],
        )
    ).first()


def still_heard(session: Session, town_id: int, platform: str, user_id: str) -> bool:
    """Whether what the town is about to write for the member (an answer composed for them)
    may still be written: not forgotten and not muted since their words were heard.

    The member's visitor row is taken for writing first (``hold_member``), so the check and the
    write after it are one transaction no forget can come between: a forget's order waits for
    it to commit (and then finds what it wrote), or it sees the order and writes nothing."""
    return hold_member(session, town_id, platform, user_id) and not is_muted(
        session, town_id, platform, user_id
    )


def hold_member(session: Session, town_id: int, platform: str, user_id: str) -> bool:
    """Take the member's visitor row for writing (the store's writer lock on SQLite, the row's
    lock elsewhere) until ``session`` ends; whether the member is still there to write for
    (a row, and no forget of them under way). A forget takes the same row first
    (``town.features.consent.forget``)."""
    held = session.exec(
        update(Visitor)
        .where(
            col(Visitor.town_id) == town_id,
            col(Visitor.platform) == platform,
            col(Visitor.platform_user_id) == user_id[:100],
        )
        .values(role=Visitor.role)  # changes nothing: the statement is the lock
    )
    forgetting = session.exec(
        select(ForgetOrder.id).where(
            ForgetOrder.town_id == town_id,
            ForgetOrder.platform == platform,
            ForgetOrder.platform_user_id == user_id[:100],
            ForgetOrder.done_at == None,  # noqa: E711 (SQL's IS NULL)
        )
    ).first()
    return bool(held.rowcount) and forgetting is None


def set_muted(engine: Engine, platform: str, user_id: str, muted: bool) -> bool:
    """Mute or unmute a member; whether that changed anything."""
    if not user_id:
        raise ValueError("mute whom? a member's id is needed")
    with engine.unit(changes_town=False) as session:
        row = _row(session, engine.town_id, platform, user_id)
        if muted and row is None:
            session.add(
                MutedMember(town_id=engine.town_id, platform=platform, platform_user_id=user_id)
            )
            return True
        if not muted and row is not None:
            session.delete(row)
            return True
        return False


def muted_words(engine: Engine, visit: Visit) -> str | None:
    """A muted member's words, audited as received (``say:muted``) and nothing else: no
    resident hears or answers them. Returns the area (None: the member is not muted, and the
    visitor path goes on)."""
    with engine.unit(changes_town=False) as session:
        if not is_muted(session, engine.town_id, visit.platform, visit.user_id):
            return None
        area = area_named(World.load(session, engine.town_id, engine.spec), visit.area)
        residents = [r.name for r in engine.spec.residents]
        who = audit.identity(visitor_name(visit.name, residents), visit.platform, visit.user_id)
        audit.record(
            session,
            engine.town_id,
            audit.IN,
            MUTED,
            who,
            visit.spoken.said,
            game_time=engine.town(session).clock,
            platform=visit.platform,
            channel=area,
        )
        return area


def closed_at(engine: Engine, area: str) -> bool:
    """Whether an admin closed ``area``'s channel: words said there are heard at the next tick
    like any, but no resident answers there."""
    with engine.store.session() as session:
        return switches(session, engine.town_id).get(area) == CLOSED

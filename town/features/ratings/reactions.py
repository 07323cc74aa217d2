"""A member's reaction to a resident's message, stored against the message and heard by the
resident. The message is found by the platform's own id for it (the ``Delivery`` row its pump
wrote); what it was (who said it, which task made it, which model, where, when) comes from its
outbox event. A removed reaction deletes the row.

The member is kept only as a pseudonym (``pseudonym``). A muted member's reactions are never
stored (``town.inputs.consent.is_muted``); a forgotten member's rows go with the member (the
consent feature's forget registry lists this table). The resident hears of a reaction at the
next tick (a pending input), so a reaction never makes a thinking tick think again."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import delete
from sqlmodel import Session, col, select

from town.inputs.consent import is_muted
from town.inputs.naming import visitor_name
from town.inputs.unit import input_unit
from town.outbox import audit
from town.store.models import Delivery, OutboxEvent, PendingInput, Reaction
from town.text import clean_text, name_of
from town.tick.engine import Engine
from town.tick.pending import OBSERVED

REACT = "react"  # the audit row of a reaction (direction "in")
MAX_EMOJI = 80
VISITOR, CONVERSATION, NARRATION = "visitor", "conversation", "narration"
TASKS = (VISITOR, CONVERSATION, NARRATION)

Muted = Callable[[Session, int, str, str], bool]


@dataclass(frozen=True)
class Reacted:
    """A reaction as a platform reports it: who, on which of its messages, with what."""

    platform: str
    user_id: str
    name: str  # the member's display name, for the resident's observation
    message_id: str  # the platform's id of the resident's message (``Delivery.message_id``)
    emoji: str  # the emoji itself, or ":name:" for a custom one
    added: bool = True  # False: the reaction was removed


def pseudonym(town_id: int, platform: str, user_id: str) -> str:
    """The member as reactions keep them: the same for every reaction, not their id."""
    return hashlib.sha256(f"bottown:{town_id}:{platform}:{user_id}".encode()).hexdigest()[:32]


def task_of(kind: str, payload: dict[str, object]) -> str:
    """Which task made a message: an answer to a visitor, a conversation line, or narration."""
    if kind == "said":
        return VISITOR if payload.get("reply_to") else CONVERSATION
    return NARRATION


def message_of(
    session: Session, town_id: int, platform: str, message_id: str
) -> OutboxEvent | None:
    """The resident's message behind a platform's message id (None: not one of the town's)."""
    if not message_id:
        return None
    found = session.exec(
        select(OutboxEvent)
        .join(Delivery, col(Delivery.outbox_id) == col(OutboxEvent.id))
        .where(
            OutboxEvent.town_id == town_id,
            Delivery.platform == platform,
            Delivery.message_id == message_id[:200],
        )
    ).first()
    if found is None or not found.payload.get("resident"):
        return None  # the town's own narration or digest: nobody to rate
    return found


async def react(engine: Engine, reacted: Reacted, *, muted: Muted = is_muted) -> bool:
    """Store (or remove) a reaction; an added one is also an observation for the resident who
    said the message. Returns whether anything changed (False: not a resident's message, a
    muted member, a reaction already known)."""
    emoji = reacted.emoji.strip()[:MAX_EMOJI]
    if not emoji or not reacted.user_id:
        raise ValueError("a reaction needs an emoji and a member")
    town_id = engine.town_id
    member = pseudonym(town_id, reacted.platform, reacted.user_id)
    async with input_unit(engine, changes_town=False) as unit:  # (no tick thinks again)
        session = unit.session
        if muted(session, town_id, reacted.platform, reacted.user_id):
            return False
        message = message_of(session, town_id, reacted.platform, reacted.message_id)
        if message is None or message.id is None:
            return False
        if not reacted.added:
            gone = session.execute(
                delete(Reaction).where(
                    col(Reaction.outbox_id) == message.id,
                    col(Reaction.platform) == reacted.platform,
                    col(Reaction.member) == member,
                    col(Reaction.emoji) == emoji,
                )
            )
            return bool(getattr(gone, "rowcount", 0))
        known = session.exec(
            select(Reaction.id).where(
                Reaction.outbox_id == message.id,
                Reaction.platform == reacted.platform,
                Reaction.member == member,
                Reaction.emoji == emoji,
            )
        ).first()
        if known is not None:
            return False
        resident = str(message.payload.get("resident", ""))
        session.add(
            Reaction(
                town_id=town_id,
                outbox_id=message.id,
                platform=reacted.platform,
                member=member,
                emoji=emoji,
                resident=resident,
                task=task_of(message.kind, message.payload),
                model=str(message.payload.get("model", ""))[:120],
                place=message.channel,
                game_time=message.game_time,
            )
        )
        residents = engine.residents(session)
        name = visitor_name(name_of(reacted.name) or name_of("Someone"), list(residents))
        said = clean_text(str(message.payload.get("text", "")), 200)
        unit.audit(
            audit.IN,
            REACT,
            audit.identity(name, reacted.platform, reacted.user_id),
            f'{emoji} to {resident}: "{said}"',
            platform=reacted.platform,
            channel=message.channel,
        )
        if resident in residents:  # heard at the next tick, like an inner voice
            heard = f'{name} reacted with {emoji} to what I said: "{said}"'
            session.add(PendingInput(town_id=town_id, resident=resident, kind=OBSERVED, text=heard))
        return True

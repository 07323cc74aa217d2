"""Visitors' chats, as rows: what a visitor said at a place, what a resident answered, and
what the town told a visitor there (``ChatLine``). Written in the one short write of a visitor's
words (``town.inputs.visitor``); read by the next tick, which gives the words to the residents
there (``town.tick.heard``), by the resident who answers next (the thread,
``town.inputs.chat``), and by the web page's history.

A line holds the words as residents perceive and remember them: plain (``town.text.Plain``:
one line of printable text with no mention syntax and no mass ping, made once where the words
came in); "@everyone @here party at my place" is heard as "party at my place". The audit log
keeps what came in as it came.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func
from sqlmodel import Session, col, select

from town.store.ids import new_ids
from town.store.models import ChatLine
from town.text import Name, Plain

VISITOR, RESIDENT, TOWN = "visitor", "resident", "town"
SPOKEN = (VISITOR, RESIDENT)  # the lines of a conversation (the town's word is not one)
MARKER = " (a visitor)"  # after a visitor's name that could pass for another's


def quoted(who: str, role: str, words: str) -> str:
    """A visitor's words as residents perceive them: a quotation, never an instruction, and
    always the visitor's ('Mallory (a visitor, a reporter) said: "..."'), so that what they
    claim is remembered and retold as a visitor's claim. ``who``, ``role`` and ``words`` come
    plain (``town.text.Plain``)."""
    aside = f"a visitor, {role}" if role else "a visitor"
    return f'{who.removesuffix(MARKER)} ({aside}) said: "{words}"'


def thread_of(platform: str, user_id: str) -> str:
    """The key of a visitor's chats: one per visitor (and place)."""
    return f"{platform}:{user_id}"[:130]


def add_line(
    session: Session,
    town_id: int,
    area: str,
    speaker: Name,
    kind: str,
    thread: str,
    text: Plain,
    game_time: datetime,
    *,
    addressee: Name | None = None,
    platform: str = "",
    heard: bool = True,
) -> ChatLine:
    """One line in the unit of work ``session``, its names and words plain as given. Its id
    comes from ``town.store.ids`` (never one a forgotten line had: residents keep chat-line ids
    as how far they have heard)."""
    (line_id,) = new_ids(session, "chatline", 1)
    row = ChatLine(
        id=line_id,
        town_id=town_id,
        area=area[:300],
        speaker=speaker,
        kind=kind,
        addressee=addressee or "",
        thread=thread[:130],
        platform=platform[:20],
        heard=heard,
        text=text,
        game_time=game_time,
    )
    session.add(row)
    return row


def thread_lines(
    session: Session, town_id: int, area: str, thread: str, limit: int
) -> list[ChatLine]:
    """The newest ``limit`` lines of a visitor's chat at ``area`` (the words residents heard
    and their answers), oldest first."""
    rows = session.exec(
        select(ChatLine)
        .where(
            ChatLine.town_id == town_id,
            ChatLine.area == area,
            ChatLine.thread == thread,
            col(ChatLine.kind).in_(SPOKEN),
            col(ChatLine.heard),
        )
        .order_by(col(ChatLine.id).desc())
        .limit(limit)
    ).all()
    return list(reversed(rows))


def unheard(
    session: Session, town_id: int, after: int, since: datetime, upto: int
) -> list[ChatLine]:
    """The lines spoken after line ``after`` (0: none read yet, so those at the clock ``since``
    or later), up to line ``upto``, oldest first; words over a visitor's rate are not among
    them."""
    query = select(ChatLine).where(
        ChatLine.town_id == town_id,
        col(ChatLine.kind).in_(SPOKEN),
        col(ChatLine.heard),
        col(ChatLine.id) <= upto,
    )
    if after:
        query = query.where(col(ChatLine.id) > after)
    else:
        query = query.where(col(ChatLine.game_time) >= since)
    return list(session.exec(query.order_by(col(ChatLine.id))).all())


def newest(session: Session, town_id: int) -> int:
    """The id of the town's newest line (0: none)."""
    found = session.exec(select(func.max(ChatLine.id)).where(ChatLine.town_id == town_id)).one()
    return int(found or 0)


def told_since(session: Session, town_id: int, area: str, thread: str, since: datetime) -> bool:
    """Whether the town told this visitor something at ``area`` at ``since`` or later."""
    found = session.exec(
        select(ChatLine.id).where(
            ChatLine.town_id == town_id,
            ChatLine.area == area,
            ChatLine.thread == thread,
            ChatLine.kind == TOWN,
            col(ChatLine.game_time) >= since,
        )
    ).first()
    return found is not None

"""Who a visitor is: the name and role they take (``join``), their row (known by platform and
user id), and their name as the town shows it and residents hear it (plain, marked if it could
pass for another, ``town.inputs.naming``)."""

from __future__ import annotations

from sqlmodel import Session, select

from town.inputs.naming import MARKER, visitor_name
from town.inputs.unit import input_unit
from town.store.models import Resident, Visitor
from town.text import NAME_LIMIT, ROLE_LIMIT, Line, Name, Plain, name_of, plain
from town.tick.engine import Engine


def marked(name: Name, residents: dict[str, Resident]) -> Name:
    """The visitor's name, marked if it could pass for another (the marker kept whole within
    ``NAME_LIMIT``)."""
    who = visitor_name(name, residents)
    if who == name:
        return who
    return visitor_name(Name(Plain(Line(name[: NAME_LIMIT - len(MARKER) - 2]))), residents)


def known_name(row: Visitor, residents: dict[str, Resident]) -> Name:
    """The name a known visitor goes by, as stored (plain since it was stored; made so once
    more for rows stored before names were)."""
    return visitor_name(name_of(row.display_name), residents)


async def join(
    engine: Engine, platform: str, user_id: str, name: str, role: str = ""
) -> tuple[str, str]:
    """A visitor takes a name and a role; returns them as stored (the name marked if it could
    pass for a resident, an inner voice or a mention: ``town.inputs.naming``)."""
    who, what = name_of(name), plain(role, ROLE_LIMIT)
    if not who:
        raise ValueError("join as whom? give a name (mentions are no name)")
    async with input_unit(engine, changes_town=False) as unit:
        residents = engine.residents(unit.session)
        return visitor_row(unit.session, engine.town_id, platform, user_id, who, what, residents)


def visitor_row(
    session: Session,
    town_id: int,
    platform: str,
    user_id: str,
    name: Name,
    role: str,
    residents: dict[str, Resident],
) -> tuple[str, str]:
    """The visitor's name (marked if need be) and role as stored: a visitor who joined keeps
    the name and role they chose unless a new role comes with the words."""
    known = known_visitor(session, town_id, platform, user_id)
    if known is not None and not role:
        return known_name(known, residents), known.role
    who = marked(name, residents)
    remember_visitor(session, town_id, platform, user_id, who, role)
    return who, role


def known_visitor(session: Session, town_id: int, platform: str, user_id: str) -> Visitor | None:
    return session.exec(
        select(Visitor).where(
            Visitor.town_id == town_id,
            Visitor.platform == platform,
            Visitor.platform_user_id == user_id[:100],
        )
    ).first()


def remember_visitor(
    session: Session, town_id: int, platform: str, user_id: str, name: Name, role: str
) -> None:
    row = known_visitor(session, town_id, platform, user_id)
    if row is None:
        row = Visitor(
            town_id=town_id,
            platform=platform,
            platform_user_id=user_id[:100],
            display_name=name,
            role=role[:ROLE_LIMIT],
        )
    else:
        row.display_name, row.role = name, role[:ROLE_LIMIT] or row.role
    session.add(row)

"""Who a visitor is: the name and role they take (``join``), their row (known by platform and
user id), and their name as the town shows it (marked if it could pass for another,
``town.inputs.naming``) and as residents hear it (no mention syntax, ``heard_as``)."""

from __future__ import annotations

from sqlmodel import Session, select

from town.inputs.naming import MARKER, visitor_name
from town.inputs.unit import input_unit
from town.outbox import chatlog
from town.store.models import Resident, Visitor
from town.text import clean_text
from town.tick.engine import Engine


def heard_as(who: str) -> str:
    """A visitor's name (as ``visitor_name`` shows it) as residents hear it: with no mention
    syntax or mass ping, its marker kept."""
    plain = chatlog.unpinged(who.removesuffix(MARKER)) or "a visitor"
    return plain + MARKER if who.endswith(MARKER) else plain


def quoted(who: str, role: str, words: str) -> str:
    """A visitor's words as residents perceive them: a quotation, never an instruction, with
    no mention syntax or mass ping."""
    role = chatlog.unpinged(clean_text(role, 200))
    return f'{heard_as(who)}{f" ({role})" if role else ""} said: "{chatlog.unpinged(words)}"'


def marked(name: str, residents: dict[str, Resident]) -> str:
    """The visitor's name, marked if it could pass for another (kept within 80 characters)."""
    who = visitor_name(name, residents)
    return who if who == name else visitor_name(name[:64], residents)


async def join(
    engine: Engine, platform: str, user_id: str, name: str, role: str = ""
) -> tuple[str, str]:
    """A visitor takes a name and a role; returns them as stored (the name marked if it could
    pass for a resident, an inner voice or a mention: ``town.inputs.naming``)."""
    who, what = clean_text(name, 80), clean_text(role, 200)
    if not who:
        raise ValueError("join as whom? give a name")
    async with input_unit(engine, changes_town=False) as unit:
        residents = engine.residents(unit.session)
        return visitor_row(unit.session, engine.town_id, platform, user_id, who, what, residents)


def visitor_row(
    session: Session,
    town_id: int,
    platform: str,
    user_id: str,
    name: str,
    role: str,
    residents: dict[str, Resident],
) -> tuple[str, str]:
    """The visitor's name (marked if need be) and role as stored: a visitor who joined keeps
    the name and role they chose unless a new role comes with the words."""
    known = known_visitor(session, town_id, platform, user_id)
    if known is not None and not role:
        return visitor_name(known.display_name, residents), known.role
    who = visitor_name(name, residents)
    if who != name:  # the marker kept whole within the column's 80 characters
        who = visitor_name(name[:64], residents)
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
    session: Session, town_id: int, platform: str, user_id: str, name: str, role: str
) -> None:
    row = known_visitor(session, town_id, platform, user_id)
    if row is None:
        row = Visitor(
            town_id=town_id,
            platform=platform,
            platform_user_id=user_id[:100],
            display_name=name[:80],
            role=role[:200],
        )
    else:
        row.display_name, row.role = name[:80], role[:200] or row.role
    session.add(row)

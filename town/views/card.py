"""What a visitor may see of the town at a glance, changing nothing in it: the map (each area,
who is there and doing what) and a resident's card (who they are, today's plan, recent memories
and reflections, the people they know). Private memories never appear on a card."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime

from sqlmodel import Session, col, or_, select
from sqlmodel.sql.expression import SelectOfScalar

from town.store.models import Memory, PlanItem, Resident
from town.tick.engine import Engine
from town.tick.state import ResidentState
from town.views.reading import reading
from town.world.persona import MapBox, TownSpec
from town.world.places import World

RECENT_MEMORIES = 8
RECENT_REFLECTIONS = 5
HOW_WE_MET = 2  # memories quoted for each person a resident knows


@dataclass(frozen=True)
class MapPlace:
    name: str
    description: str
    box: MapBox | None  # from town.toml; None: the map lays it out itself


@dataclass(frozen=True)
class Present:
    """A resident on the map."""

    name: str
    avatar: str  # the resident's own emoji
    area: str
    action: str
    action_emoji: str
    awake: bool


@dataclass(frozen=True)
class TownMap:
    clock: datetime
    places: list[MapPlace]
    residents: list[Present]


@dataclass(frozen=True)
class PlanLine:
    start: datetime
    minutes: int
    description: str
    location: str


@dataclass(frozen=True)
class Remembered:
    created: datetime
    kind: str
    text: str
    importance: int


@dataclass(frozen=True)
class Acquaintance:
    name: str
    avatar: str
    how: list[str]  # what the resident remembers of them, newest first


@dataclass(frozen=True)
class ResidentCard:
    who: Present
    occupation: str
    age: int
    about: str  # who, now, next and today, as a person would say it (``about``)
    summary: str  # the resident's own summary of itself; the seed paragraph before the first
    plan: list[PlanLine]
    memories: list[Remembered]  # the newest that are not reflections nor private
    reflections: list[Remembered]
    people: list[Acquaintance]


async def town_map(engine: Engine) -> TownMap:
    """Every area of the town and every resident where the store says they are."""
    with reading(engine) as read:
        residents = [_present(engine.spec, row) for row in read.residents().values()]
        clock = read.town.clock
    places = [MapPlace(a.name, a.description, a.map) for a in engine.spec.areas]
    return TownMap(clock, places, residents)


async def resident_card(engine: Engine, name: str) -> ResidentCard:
    """``name``'s card (a first name will do); ``UnknownResident`` when nobody is called so."""
    with reading(engine) as read:
        row = read.resident(name)
        assert row.id is not None
        spec = engine.spec.resident(row.name)
        state = ResidentState.of(row)
        plan = _plan(read.session, row.id, state.day)
        public = (
            select(Memory)
            .where(Memory.resident_id == row.id, col(Memory.private).is_(False))
            .order_by(col(Memory.created).desc(), col(Memory.id).desc())
        )
        others = read.residents()
        memories = read.session.exec(
            public.where(col(Memory.kind).not_in(("reflection", "seed"))).limit(RECENT_MEMORIES)
        ).all()
        reflections = read.session.exec(
            public.where(Memory.kind == "reflection").limit(RECENT_REFLECTIONS)
        ).all()
        people = _people(read.session, public, engine.spec, row.name, others.values())
        who = _present(engine.spec, row)
        clock = read.town.clock
    return ResidentCard(
        who,
        spec.occupation,
        spec.age,
        about(who, spec.occupation, plan, clock, engine.spec),
        row.summary or spec.paragraph,
        plan,
        [_remembered(m) for m in memories],
        [_remembered(m) for m in reflections],
        people,
    )


def about(
    who: Present, occupation: str, plan: list[PlanLine], clock: datetime, town: TownSpec
) -> str:
    """The card's first words, as a person would put them: who, what now, what next, the rest
    of today (each thing once), and an event of the day the resident hosts."""
    first = who.name.split()[0]
    said = [f"{who.name}, {occupation}." if occupation else f"{who.name}."]
    if who.awake:
        said.append(f"Now {who.action} at {who.area}.")
    else:
        said.append(f"Asleep at {who.area}.")
    now = _aware(clock)
    later = [p for p in plan if _aware(p.start) > now and p.description != who.action]
    if later:
        said.append(f"Next, at {later[0].start:%H:%M}: {later[0].description}.")
        rest = [d for d in dict.fromkeys(p.description for p in later) if d != later[0].description]
        if rest:
            said.append(f"Later today: {', '.join(rest[:4])}.")
    hosting = [
        e
        for e in town.scenario.events
        if e.host == who.name and e.date == now.date() and e.ends_at > now
    ]
    for event in hosting:
        said.append(f"{first} hosts the {event.name} at {event.location}, {event.start}.")
    return " ".join(said)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _present(spec: TownSpec, row: Resident) -> Present:
    avatar = next((r.avatar_emoji for r in spec.residents if r.name == row.name), "")
    awake = ResidentState.of(row).awake
    area = World.area_of(row.location)
    return Present(row.name, avatar, area, row.action if awake else "asleep", row.emoji, awake)


def _plan(session: Session, resident_id: int, day: str) -> list[PlanLine]:
    """Today's plan as the day's chunks: the whole day, not only the hours cut finer so far; a
    thing done chunk after chunk ("opening Hobbs Cafe", "still opening Hobbs Cafe") is one line."""
    if not day:
        return []
    chunks = session.exec(
        select(PlanItem)
        .where(
            PlanItem.resident_id == resident_id,
            PlanItem.day == date.fromisoformat(day),
            PlanItem.level == "day",
        )
        .order_by(col(PlanItem.start), col(PlanItem.id))
    ).all()
    lines: list[PlanLine] = []
    for i in chunks:
        last = lines[-1] if lines else None
        what = i.description.removeprefix("still ")
        if last and (last.description, last.location) == (what, i.location):
            lines[-1] = PlanLine(last.start, last.minutes + i.duration_min, what, i.location)
        else:
            lines.append(PlanLine(i.start, i.duration_min, what, i.location))
    return lines


def _remembered(memory: Memory) -> Remembered:
    return Remembered(memory.created, memory.kind, memory.text, memory.importance)


def _people(
    session: Session,
    public: SelectOfScalar[Memory],
    spec: TownSpec,
    me: str,
    others: Iterable[Resident],
) -> list[Acquaintance]:
    """Everyone the resident's public memories name, with the newest of those memories."""
    found = []
    for row in others:
        if row.name == me:
            continue
        first = row.name.split()[0]
        named = or_(col(Memory.text).contains(row.name), col(Memory.text).contains(first))
        how = session.exec(public.where(named).limit(HOW_WE_MET)).all()
        if how:
            avatar = next((r.avatar_emoji for r in spec.residents if r.name == row.name), "")
            found.append(Acquaintance(row.name, avatar, [m.text for m in how]))
    return found

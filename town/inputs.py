"""What people do to a town from outside: a visitor speaks, an inner voice, an edited object, an
interview. Every platform (and the shell) goes through these same functions, under the engine's
lock, each in one transaction.

A visitor's words reach residents only as a quoted observation, never as an instruction; only an
admin's inner voice is a directive.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from uuid import uuid4

from sqlmodel import Session, select

from town.engine import Engine
from town.events import TownEvent, write_outbox
from town.llm.schemas import InterviewInput, Utterance, UtterInput
from town.llm.tasks import INTERVIEW, UTTER
from town.memory import NewMemory
from town.mind import Tick, perceive, react_to
from town.state import ResidentState
from town.store.models import Resident, Visitor
from town.world import UnknownPlace, World

MAX_INPUT_CHARS = 2000
MAX_REPLIES = 2  # a visitor's "hi" in a full cafe gets at most this many answers


class UnknownResident(LookupError):
    """No resident of that name in this town."""


def clean_text(text: str, limit: int = MAX_INPUT_CHARS) -> str:
    """One line of printable text, cut to ``limit`` characters (with an ellipsis)."""
    kept = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text)
    flat = " ".join(kept.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _resident(residents: dict[str, Resident], name: str) -> Resident:
    wanted = " ".join(name.split()).casefold()
    for known, row in residents.items():
        if known.casefold() == wanted or known.split()[0].casefold() == wanted:
            return row
    raise UnknownResident(f"no resident named {name!r}; residents: {', '.join(sorted(residents))}")


@dataclass
class SayResult:
    area: str
    heard_by: list[str] = field(default_factory=list)
    replies: list[TownEvent] = field(default_factory=list)


async def say(
    engine: Engine,
    location: str,
    speaker: str,
    text: str,
    *,
    role: str = "",
    platform: str = "cli",
    user_id: str = "",
) -> SayResult:
    """A visitor speaks at a location: an observation for every resident there (asleep ones
    remember it on waking); awake ones perceive and may react at once, and at most
    ``MAX_REPLIES`` of them answer, a resident addressed by name first."""
    words = clean_text(text)
    if not words:
        raise ValueError("say what? the message is empty")
    who = clean_text(speaker, 80) or "a visitor"
    async with engine.lock:
        with engine.store.session() as session:
            town = engine.town(session)
            tick = engine.new_tick(session, town.clock)
            area = _area(tick.world, location)
            visitor = _known_visitor(session, engine.town_id, platform, user_id or who)
            if visitor is None or role:
                _remember_visitor(session, engine.town_id, platform, user_id or who, who, role)
            else:  # a visitor who joined keeps the name and role they chose
                who, role = visitor.display_name, visitor.role
            quoted = f'{who}{f" ({clean_text(role, 200)})" if role else ""} said: "{words}"'
            present = [r for r in tick.residents.values() if World.area_of(r.location) == area]
            result = SayResult(area, [r.name for r in present])
            responders: list[Resident] = []
            for row in present:
                state = tick.state(row)
                state.inbox.append(quoted)
                if state.awake and await react_to(tick, row, perceive(tick, row, state)) == who:
                    responders.append(row)
            addressed = [r for r in present if r.name.split()[0].casefold() in words.casefold()]
            ordered = [r for r in addressed if r in responders] + [
                r for r in responders if r not in addressed
            ]
            if not ordered and ("?" in words or addressed):
                ordered = [r for r in addressed or present if tick.state(r).awake][:1]
            for row in ordered[:MAX_REPLIES]:
                result.replies.append(await _reply(tick, row, who, words))
            tick.save_states()
            write_outbox(session, engine.town_id, f"say:{uuid4().hex}", tick.events)
        if engine.after_commit:
            engine.after_commit()
    return result


async def _reply(tick: Tick, resident: Resident, visitor: str, words: str) -> TownEvent:
    found = await tick.stream(resident).recall(tick.session, f"{visitor}: {words}", tick.now, k=6)
    reply = await tick.brain.run(
        UTTER,
        UtterInput(
            speaker=resident.name,
            listener=visitor,
            speaker_summary=resident.summary,
            relationship="",
            memories=[r.memory.text for r in found if words not in r.memory.text],
            history=[Utterance(speaker=visitor, text=words)],
            location=resident.location,
        ),
        resident=resident.name,
    )
    text = clean_text(reply.text, 1000)
    await tick.stream(resident).record(
        tick.session,
        [NewMemory("chat", f'{resident.name} said to {visitor}: "{text}"', 4)],
        tick.now,
    )
    tick.emit("said", resident, text, to=visitor, emoji=resident.emoji)
    return tick.events[-1]


async def whisper(engine: Engine, resident: str, text: str) -> str:
    """The resident's inner voice: a directive it perceives and acts on at its next tick."""
    words = clean_text(text)
    if not words:
        raise ValueError("whisper what? the text is empty")
    async with engine.lock:
        with engine.store.session() as session:
            row = _resident(engine.residents(session), resident)
            state = ResidentState.of(row)
            state.inbox.append(f"Inner voice: {words}")
            state.directive = words
            state.save(row)
            session.add(row)
            return row.name


async def set_object(engine: Engine, path: str, new_state: str) -> str:
    """Rewrite an object's state in words; residents there notice it at their next tick."""
    words = clean_text(new_state, 200)
    if not words:
        raise ValueError("set it to what? the state is empty")
    async with engine.lock:
        with engine.store.session() as session:
            world = World.load(session, engine.town_id, engine.spec)
            place, name = world.find_object(path)
            world.set_state(session, place, name, words)
            clock = engine.town(session).clock
            event = TownEvent(
                "object",
                World.area_of(place),
                clock,
                "",
                f"the {name} in {place} is now {words}",
                {"object": f"{place}: {name}", "state": words},
            )
            write_outbox(session, engine.town_id, f"set:{uuid4().hex}", [event])
            return f"{place}: {name}"


async def interview(
    engine: Engine,
    resident: str,
    question: str,
    asker: str = "",
    kinds: Collection[str] | None = None,
) -> str:
    """A private question: answered from retrieved memories; nothing changes in the town but the
    memories' last-access times. ``kinds`` limits the memory kinds retrieval may see (the paper's
    ablations; ``None`` is all of them, an empty collection none)."""
    words = clean_text(question)
    if not words:
        raise ValueError("ask what? the question is empty")
    async with engine.lock:
        with engine.store.session() as session:
            row = _resident(engine.residents(session), resident)
            now = engine.town(session).clock
            assert row.id is not None
            found = await engine.streams(row.id).recall(session, words, now, k=10, kinds=kinds)
            answer = await engine.brain.run(
                INTERVIEW,
                InterviewInput(
                    resident=row.name,
                    summary=row.summary,
                    memories=[r.memory.text for r in found],
                    question=words,
                    asker=clean_text(asker, 200) or None,
                ),
                resident=row.name,
            )
        if engine.after_commit:
            engine.after_commit()
        return answer.answer


def _area(world: World, location: str) -> str:
    resolved = world.resolve(location, "")
    if not resolved:
        raise UnknownPlace(f"no place {location!r}; places: {', '.join(world.areas())}")
    return World.area_of(resolved)


def _known_visitor(session: Session, town_id: int, platform: str, user_id: str) -> Visitor | None:
    return session.exec(
        select(Visitor).where(
            Visitor.town_id == town_id,
            Visitor.platform == platform,
            Visitor.platform_user_id == user_id[:100],
        )
    ).first()


def _remember_visitor(
    session: Session, town_id: int, platform: str, user_id: str, name: str, role: str
) -> None:
    row = _known_visitor(session, town_id, platform, user_id)
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


@dataclass(frozen=True)
class Whereabouts:
    clock: datetime
    paused: bool
    minutes_per_tick: int
    by_area: dict[str, list[tuple[str, str, bool]]]  # area -> [(resident, action, awake)]


async def whereabouts(engine: Engine) -> Whereabouts:
    """Who is where and doing what, with the town's clock."""
    async with engine.lock:
        with engine.store.session() as session:
            town = engine.town(session)
            by_area: dict[str, list[tuple[str, str, bool]]] = {}
            for row in engine.residents(session).values():
                awake = ResidentState.of(row).awake
                by_area.setdefault(World.area_of(row.location), []).append(
                    (row.name, row.action, awake)
                )
            return Whereabouts(town.clock, town.paused, town.minutes_per_tick, by_area)


async def look(engine: Engine, location: str) -> str:
    """A place as a visitor sees it now: what it is, if it is open, its objects, who is there."""
    async with engine.lock:
        with engine.store.session() as session:
            world = World.load(session, engine.town_id, engine.spec)
            area = _area(world, location)
            clock = engine.town(session).clock
            spec = world.spec.area(area)
            lines = [f"{area}: {spec.description}" if spec.description else area]
            if spec.opens and spec.closes:
                state = "open" if world.is_open(area, clock) else "closed"
                lines.append(f"Open {spec.opens}-{spec.closes}; now ({clock:%H:%M}) it is {state}.")
            for place, name, obj_state in world.objects_in(area):
                lines.append(f"- {place.split(': ', 1)[-1]}: the {name} is {obj_state}")
            here = [
                (r.name, r.action, ResidentState.of(r).awake)
                for r in engine.residents(session).values()
                if World.area_of(r.location) == area
            ]
            if not here:
                lines.append("Nobody is here.")
            for name, action, awake in here:
                lines.append(f"{name} is {action if awake else 'asleep'}.")
            return "\n".join(lines)


async def set_paused(engine: Engine, paused: bool) -> datetime:
    async with engine.lock:
        with engine.store.session() as session:
            town = engine.town(session)
            town.paused = paused
            session.add(town)
            return town.clock


async def set_speed(engine: Engine, minutes_per_tick: int) -> int:
    if not 1 <= minutes_per_tick <= 24 * 60:
        raise ValueError("minutes per tick must be 1 to 1440")
    async with engine.lock:
        with engine.store.session() as session:
            town = engine.town(session)
            town.minutes_per_tick = minutes_per_tick
            session.add(town)
            return minutes_per_tick


async def join(
    engine: Engine, platform: str, user_id: str, name: str, role: str = ""
) -> tuple[str, str]:
    """A visitor takes a name and a role; returns them as stored."""
    who, what = clean_text(name, 80), clean_text(role, 200)
    if not who:
        raise ValueError("join as whom? give a name")
    async with engine.lock:
        with engine.store.session() as session:
            _remember_visitor(session, engine.town_id, platform, user_id, who, what)
    return who, what

"""What people do to a town from outside: a visitor speaks, an inner voice, an edited object, an
interview. Every platform (and the shell) goes through these same functions, under the engine's
lock, each in one transaction.

A visitor's words reach residents only as a quoted observation, never as an instruction; only an
admin's inner voice is a directive.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from uuid import uuid4

from sqlmodel import Session, select

from town.features.coaching import session as coaching
from town.inputs.limits import VisitorRateLimit
from town.llm.schemas import InterviewInput, Utterance, UtterInput
from town.llm.tasks import INTERVIEW, UTTER
from town.memory.stream import NewMemory
from town.outbox import audit
from town.outbox.events import TownEvent, write_outbox
from town.store.models import Resident, Visitor
from town.tick.engine import Engine
from town.tick.perceive import perceive
from town.tick.react import react_to
from town.tick.state import ResidentState
from town.tick.turn import Tick
from town.world.places import UnknownPlace, World

MAX_INPUT_CHARS = 2000
MAX_REPLIES = 2  # a visitor's "hi" in a full cafe gets at most this many answers


class UnknownResident(LookupError):
    """No resident of that name in this town."""


clean_text = audit.clean_text  # one line of printable text, cut (the audit log stores it so)


def resident_named(names: Iterable[str], name: str) -> str | None:
    """The full name among ``names`` that ``name`` stands for: the same name in any case and
    spacing, else a first name ("isabella" for Isabella Rodriguez); None if none does."""
    wanted = " ".join(name.split()).casefold()
    if not wanted:
        return None
    known = list(names)
    for full in known:
        if full.casefold() == wanted:
            return full
    return next((full for full in known if full.partition(" ")[0].casefold() == wanted), None)


def _resident(residents: dict[str, Resident], name: str) -> Resident:
    full = resident_named(residents, name)
    if full is None:
        raise UnknownResident(
            f"no resident named {name!r}; residents: {', '.join(sorted(residents))}"
        )
    return residents[full]


@dataclass
class SayResult:
    area: str
    heard_by: list[str] = field(default_factory=list)
    replies: list[TownEvent] = field(default_factory=list)
    limited: bool = False  # over the visitor's message rate: nobody heard it


async def say(
    engine: Engine,
    location: str,
    speaker: str,
    text: str,
    *,
    role: str = "",
    platform: str = "cli",
    user_id: str = "",
    rate: VisitorRateLimit | None = None,
) -> SayResult:
    """A visitor speaks at a location: an observation for every resident there (asleep ones
    remember it on waking); awake ones perceive and may react at once, and at most
    ``MAX_REPLIES`` of them answer, a resident addressed by name first.

    Over ``rate`` (a visitor's messages per minute), nobody hears it: it is only audited, and
    the first such message of a minute gets the visitor one polite notice in the channel."""
    words = clean_text(text)
    if not words:
        raise ValueError("say what? the message is empty")
    who = clean_text(speaker, 80) or "a visitor"
    async with engine.lock:
        with engine.unit() as session:
            town = engine.town(session)
            tick = engine.new_tick(session, town.clock)
            area = _area(tick.world, location)
            visitor = _known_visitor(session, engine.town_id, platform, user_id or who)
            if visitor is None or role:
                _remember_visitor(session, engine.town_id, platform, user_id or who, who, role)
            else:  # a visitor who joined keeps the name and role they chose
                who, role = visitor.display_name, visitor.role
            logged_as = audit.identity(who, platform, user_id)
            verdict = rate.check(platform, user_id or who) if rate is not None else None
            if verdict is not None and not verdict.allowed:
                audit.record(
                    session,
                    engine.town_id,
                    audit.IN,
                    audit.LIMITED,
                    logged_as,
                    words,
                    game_time=town.clock,
                    platform=platform,
                    channel=area,
                )
                if verdict.notify and rate is not None:
                    notice = _rate_notice(who, area, town.clock, platform, rate.per_minute)
                    write_outbox(session, engine.town_id, f"notice:{uuid4().hex}", [notice])
                return SayResult(area, limited=True)
            quoted = f'{who}{f" ({clean_text(role, 200)})" if role else ""} said: "{words}"'
            present = [r for r in tick.residents.values() if World.area_of(r.location) == area]
            result = SayResult(area, [r.name for r in present])
            coached = await _mock_interview(
                tick, area, who, role, words, platform=platform, user_id=user_id
            )
            if coached is not None:  # an interview room: a mock interview, not small talk
                result.replies.append(coached)
                present = [r for r in present if r.name != coached.resident]
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
            audit.record(  # after the LLM's answers: an early write would hold SQLite's lock
                session,
                engine.town_id,
                audit.IN,
                "say",
                logged_as,
                words,
                game_time=town.clock,
                platform=platform,
                channel=area,
            )
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


async def whisper(
    engine: Engine, resident: str, text: str, *, by: str = "", platform: str = "", user_id: str = ""
) -> str:
    """The resident's inner voice: a directive it perceives and acts on at its next tick.
    ``by``, ``platform`` and ``user_id`` say who whispered, for the audit log."""
    words = clean_text(text)
    if not words:
        raise ValueError("whisper what? the text is empty")
    async with engine.lock:
        with engine.unit() as session:
            row = _resident(engine.residents(session), resident)
            state = ResidentState.of(row)
            state.inbox.append(f"Inner voice: {words}")
            state.directive = words
            state.save(row)
            session.add(row)
            audit.record(
                session,
                engine.town_id,
                audit.IN,
                "whisper",
                audit.identity(by, platform, user_id),
                f"{row.name}: {words}",
                game_time=engine.town(session).clock,
                platform=platform,
                channel=World.area_of(row.location),
            )
            return row.name


async def set_object(
    engine: Engine,
    path: str,
    new_state: str,
    *,
    by: str = "",
    platform: str = "",
    user_id: str = "",
) -> str:
    """Rewrite an object's state in words; residents there notice it at their next tick.
    ``by``, ``platform`` and ``user_id`` say who did it, for the audit log."""
    words = clean_text(new_state, 200)
    if not words:
        raise ValueError("set it to what? the state is empty")
    async with engine.lock:
        with engine.unit() as session:
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
            audit.record(
                session,
                engine.town_id,
                audit.IN,
                "set",
                audit.identity(by, platform, user_id),
                f"{place}: {name} = {words}",
                game_time=clock,
                platform=platform,
                channel=World.area_of(place),
            )
            return f"{place}: {name}"


async def interview(
    engine: Engine,
    resident: str,
    question: str,
    asker: str = "",
    kinds: Collection[str] | None = None,
    *,
    platform: str = "",
    user_id: str = "",
) -> str:
    """A private question: answered from retrieved memories; nothing changes in the town but the
    memories' last-access times. ``kinds`` limits the memory kinds retrieval may see (the paper's
    ablations; ``None`` is all of them, an empty collection none). The question and the answer
    go to the audit log (``platform`` and ``user_id`` name the asker there, never to the LLM)."""
    words = clean_text(question)
    if not words:
        raise ValueError("ask what? the question is empty")
    async with engine.lock:
        with engine.unit(changes_town=False) as session:
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
            area = World.area_of(row.location)
            asked = audit.identity(asker, platform, user_id)
            for direction, kind, who, text in (
                (audit.IN, "interview", asked, f"{row.name}: {words}"),
                (audit.OUT, "answer", row.name, answer.answer),
            ):
                audit.record(
                    session,
                    engine.town_id,
                    direction,
                    kind,
                    who,
                    text,
                    game_time=now,
                    platform=platform,
                    channel=area,
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
        with engine.unit(changes_town=False) as session:
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
        with engine.unit(changes_town=False) as session:
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
    """Stop or start the town's clock (stored, so a restart keeps it); returns the game time.
    Resuming marks the wall time the clock runs again from, so a pause is never time missed."""
    async with engine.lock:
        with engine.unit() as session:
            town = engine.town(session)
            if town.paused and not paused:
                town.last_tick_at = datetime.now(UTC)
            town.paused = paused
            session.add(town)
            return town.clock


MIN_TICK_SECONDS, MAX_TICK_SECONDS = 0.05, 3600.0


async def set_speed(
    engine: Engine, minutes_per_tick: int, tick_seconds: float | None = None
) -> tuple[int, float | None]:
    """How much game time a tick is, and the real seconds between ticks (None: the deployment's
    default, ``settings.tick_seconds``). Stored on the town, so a restart keeps them."""
    if not 1 <= minutes_per_tick <= 24 * 60:
        raise ValueError("minutes per tick must be 1 to 1440")
    if tick_seconds is not None and not MIN_TICK_SECONDS <= tick_seconds <= MAX_TICK_SECONDS:
        raise ValueError(
            f"seconds between ticks must be {MIN_TICK_SECONDS:g} to {MAX_TICK_SECONDS:g}"
        )
    async with engine.lock:
        with engine.unit() as session:
            town = engine.town(session)
            town.minutes_per_tick = minutes_per_tick
            town.tick_seconds = tick_seconds
            session.add(town)
            return minutes_per_tick, tick_seconds


async def join(
    engine: Engine, platform: str, user_id: str, name: str, role: str = ""
) -> tuple[str, str]:
    """A visitor takes a name and a role; returns them as stored."""
    who, what = clean_text(name, 80), clean_text(role, 200)
    if not who:
        raise ValueError("join as whom? give a name")
    async with engine.lock:
        with engine.unit() as session:
            _remember_visitor(session, engine.town_id, platform, user_id, who, what)
    return who, what


def _rate_notice(who: str, area: str, clock: datetime, platform: str, per_minute: int) -> TownEvent:
    """The polite word a visitor gets, once a minute, when writing faster than the town hears."""
    text = (
        f"{who}: you are writing faster than the town can listen (at most {per_minute} "
        "messages a minute), so nobody here heard your last words. Please wait a moment."
    )
    return TownEvent("notice", area, clock, "", text, {"to": who, "for_platform": platform})


# -- mock interviews (town/coaching.py) ----------------------------------------------------


async def _mock_interview(
    tick: Tick, area: str, who: str, role: str, words: str, *, platform: str, user_id: str
) -> TownEvent | None:
    """A visitor's words in an interview room whose interviewer is there and awake: the
    interviewer's turn of the mock interview, instead of small talk (``say`` leaves it out of
    the residents who hear and react). None anywhere else."""
    spec = tick.world.spec.interviewer_in(area)
    row = tick.residents.get(spec.resident) if spec is not None else None
    if spec is None or row is None or World.area_of(row.location) != area:
        return None
    if not tick.state(row).awake:
        return None
    visitor = coaching.Interviewee(coaching.candidate_key(platform, user_id or who), who, role)
    text = clean_text(await coaching.turn(tick, row, spec, visitor, words), 3000)
    tick.emit("said", row, text, to=who, emoji=row.emoji)
    return tick.events[-1]


async def feedback(
    engine: Engine,
    platform: str,
    user_id: str,
    name: str,
    *,
    interviewer: str = "",
    location: str = "",
) -> str:
    """An interviewer's concrete feedback on the visitor's mock-interview answers, quoting them:
    the interviewer named, else the one whose interview room ``location`` is."""
    spec = engine.spec
    if not spec.interviewers:
        raise ValueError(
            "this town has no interviewers: feedback is for towns with interview rooms, "
            "such as interview-practice"
        )
    names = ", ".join(i.resident for i in spec.interviewers)
    if interviewer:
        try:
            found = spec.interviewer(interviewer)
        except KeyError:
            message = f"no interviewer named {interviewer!r}; interviewers: {names}"
            raise UnknownResident(message) from None
    else:
        chosen = spec.interviewer_in(location)
        if chosen is None:
            raise ValueError(f"name an interviewer ({names}), or ask in an interview room")
        found = chosen
    async with engine.lock:
        with engine.unit() as session:
            tick = engine.new_tick(session, engine.town(session).clock)
            row = tick.residents.get(found.resident)
            if row is None:
                raise UnknownResident(f"{found.resident} does not live in this town")
            key = coaching.candidate_key(platform, user_id or clean_text(name, 80))
            text = await coaching.feedback(tick, row, found, key)
        if engine.after_commit:
            engine.after_commit()
    return text

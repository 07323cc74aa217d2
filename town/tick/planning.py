"""Plans, top-down and lazy (Park et al., section 4.3).

At wake-up a day plan of 5-8 chunks is made from the summary description and yesterday. A chunk is
broken into hour-long items only when it becomes due, and an hour item into 5-15 minute actions
only when that hour is due; nothing later in the day is decomposed ahead of time. Every plan item
has a location, a start and a duration, and is in the memory stream: each chunk of the day plan
as a memory of its own, each decomposition as one memory that lists its steps (so an hour of
5-15 minute actions costs one embedding, not eight); a chunk of an hour or less, taken as its own
hour item without a call, shares the chunk's memory. What is embedded of a plan memory is its
gist: what is planned and where, each step once, without the resident's name, clock times,
lengths and date (the text the resident reads keeps them), and of a decomposition only the first
steps. It is about a third of the text, so the embedding costs about a third as much; and without
the name, which every query about the resident
contains, plans do not crowd out what a query is about (whom the resident knows, say).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from town.llm import schemas as s
from town.llm.offline.text import emoji_for
from town.llm.tasks import DECOMPOSE, PLAN_DAY
from town.memory.stream import NewMemory
from town.store.ids import new_ids
from town.store.models import Memory, PlanItem, Resident
from town.tick.state import ResidentState
from town.tick.turn import Tick
from town.world.daytime import fitted
from town.world.gametime import at_clock, hhmm, spoken_day
from town.world.persona import ResidentSpec

PLAN_IMPORTANCE = 5  # plan memories are not rated by the LLM: they are the resident's own intent
# A decomposition's gist keeps its first steps: the later ones mostly say the first again ("still
# ...", "finishing up"), and the cost of an embedding grows with its length.
GIST_WORDS = 12
# what a day plan takes in besides the summary and yesterday: news of the day's happenings
HEARD_QUERY = "what is happening on {day}: a party, an event, an invitation"
HEARD_KINDS = ("seed", "chat", "observation", "directive")


def _end(item: PlanItem) -> datetime:
    return item.start + timedelta(minutes=item.duration_min)


def _day_places(state: ResidentState, spec: ResidentSpec) -> list[str]:
    """For the day plan: the areas the resident knows, and its home and workplace exactly."""
    wanted = [spec.home, spec.workplace, *sorted(state.known)]
    return [p for p in dict.fromkeys(wanted) if p]


def _nearby(tick: Tick, location: str) -> list[str]:
    """For decomposition: the sub-areas of the area the plan item is in."""
    try:
        return tick.world.sub_areas(tick.world.area_of(location))
    except KeyError:
        return [location]


async def plan_day(
    tick: Tick, resident: Resident, spec: ResidentSpec, state: ResidentState
) -> list[PlanItem]:
    today = tick.now.date()
    heard = await tick.stream(resident).recall(
        tick.session, HEARD_QUERY.format(day=spoken_day(today)), tick.now, k=3, kinds=HEARD_KINDS
    )
    result = await tick.brain.run(
        PLAN_DAY,
        s.PlanDayInput(
            resident=resident.name,
            summary=resident.summary,
            # yesterday, and what the resident has heard of today's happenings (a line each)
            yesterday="\n".join([state.yesterday, *(r.memory.text for r in heard)]).strip(),
            date=spoken_day(today),
            wake_time=hhmm(min(tick.now, at_clock(today, spec.wake_time))),
            routine=list(spec.routine),
            places=_day_places(state, spec),
        ),
        resident=resident.name,
    )
    return await _store(tick, resident, result.chunks, "day", None)


async def current_action(tick: Tick, resident: Resident) -> PlanItem | None:
    """The action item in force now, decomposing the day chunk or the hour item if due.

    At most one decomposition call a tick: when the day chunk needed one, its hour's actions
    are decomposed on the next tick (and None is returned meanwhile)."""
    day = _covering(tick, resident, "day", None)
    if day is None:
        return None
    hour = _covering(tick, resident, "hour", day.id)
    if hour is None:
        hour, called = await _decompose(tick, resident, day, "hour")
        if hour is None or called:
            return None
    action = _covering(tick, resident, "action", hour.id)
    if action is None:
        action, _ = await _decompose(tick, resident, hour, "action")
    return action


def chunk_now(tick: Tick, resident: Resident) -> PlanItem | None:
    """The day plan's chunk in force now (what this part of the resident's day is)."""
    return _covering(tick, resident, "day", None)


def _covering(tick: Tick, resident: Resident, level: str, parent: int | None) -> PlanItem | None:
    """The ``level`` item (under ``parent``) in force now: the latest started one not yet over."""
    now = tick.now
    found = [
        item for item in _today(tick, resident, level, parent) if item.start <= now < _end(item)
    ]
    return max(found, key=lambda item: (item.start, item.id or 0), default=None)


def _today(
    tick: Tick, resident: Resident, level: str | None = None, parent: int | None = None
) -> list[PlanItem]:
    """Today's plan items of the resident (from the tick's snapshot and what it added): of
    ``level`` under ``parent`` (the day's chunks have none), or every hour item and action when
    ``level`` is None."""
    today = tick.now.date()
    return [
        item
        for item in tick.plan_items(resident)
        if item.day == today
        and (
            item.level != "day"
            if level is None
            else item.level == level and item.parent_id == parent
        )
    ]


def replan_from_now(tick: Tick, resident: Resident) -> None:
    """A reaction regenerates the plan from now: today's hour items and actions not yet over are
    dropped, with the actions under them, and decomposed again, lazily, when due."""
    stale = {item.id for item in _today(tick, resident) if _end(item) > tick.now}
    under = {item.id for item in _today(tick, resident) if item.parent_id in stale}
    gone = {i for i in stale | under if i is not None}
    if gone:
        tick.drop_plan_items(resident, gone)


async def _decompose(
    tick: Tick, resident: Resident, parent: PlanItem, level: str
) -> tuple[PlanItem | None, bool]:
    """Break ``parent`` into ``level`` items, from now (or its start) to its end; returns the
    item in force now and whether that took an LLM call."""
    begin = max(parent.start, tick.now.replace(second=0, microsecond=0))
    minutes = int((_end(parent) - begin).total_seconds() // 60)
    if minutes <= 0:
        return None, False
    chunk = s.PlanItem(
        start=hhmm(begin),
        duration_min=minutes,
        location=parent.location,
        description=parent.description,
    )
    called = not (level == "hour" and minutes <= 60)
    if not called:  # already an hour or less: no call, and no memory beside the chunk's own
        rows = await _store(tick, resident, [chunk], level, parent, remember=False)
    else:
        result = await tick.brain.run(
            DECOMPOSE,
            s.DecomposeInput(
                resident=resident.name,
                summary=resident.summary,
                chunk=chunk,
                granularity="hour" if level == "hour" else "action",
                places=_nearby(tick, parent.location),
            ),
            resident=resident.name,
        )
        rows = await _store(tick, resident, list(result.items) or [chunk], level, parent)
    return _covering(tick, resident, level, parent.id) or (rows[0] if rows else None), called


async def _store(
    tick: Tick,
    resident: Resident,
    items: list[s.PlanItem],
    level: str,
    parent: PlanItem | None,
    *,
    remember: bool = True,
) -> list[PlanItem]:
    today = tick.now.date()
    rows: list[PlanItem] = []
    for item in items:
        start = at_clock(today, item.start)
        if parent is not None:  # keep children inside their parent
            start = min(max(start, parent.start), _end(parent) - timedelta(minutes=1))
            duration = min(item.duration_min, int((_end(parent) - start).total_seconds() // 60))
        else:
            duration = item.duration_min
        emoji = item.emoji or emoji_for(item.description)
        # a chunk of the day is read at its start; an hour's or action's words hold throughout
        said = fitted(item.description, start, 1 if level == "day" else duration)
        rows.append(
            PlanItem(
                resident_id=resident.id or 0,
                day=today,
                level=level,
                parent_id=parent.id if parent else None,
                start=start,
                duration_min=max(1, duration),
                location=tick.world.resolve(item.location, resident.location),
                description=said,
                emoji=emoji if level == "action" else "",
            )
        )
    if not remember:
        for row in rows:
            row.memory_id = parent.memory_id if parent else None
    elif rows:  # the memories first, so each row is inserted with its memory's id
        for group, memory in zip(*await _remember(tick, resident, rows, level), strict=True):
            for row in group:
                row.memory_id = memory.id
    for row, item_id in zip(rows, new_ids(tick.session, "planitem", len(rows)), strict=True):
        row.id = item_id  # (made in Python: the tick writes nothing before its commit)
    tick.plan_items(resident).extend(rows)
    tick.session.add_all(rows)
    return rows


async def _remember(
    tick: Tick, resident: Resident, rows: list[PlanItem], level: str
) -> tuple[list[list[PlanItem]], list[Memory]]:
    """The plan memories of new plan items, recorded; and which rows each one stands for."""
    name, today = resident.name, tick.now.date()
    if level == "day":  # each chunk of the day plan is a memory of its own
        memories = [
            NewMemory(
                "plan",
                f"{name} plans to be {r.description} at {r.location} from "
                f"{hhmm(r.start)} for {r.duration_min} minutes on {spoken_day(today)}",
                PLAN_IMPORTANCE,
                gist=f"plans to be {r.description} at {r.location}",
            )
            for r in rows
        ]
        groups = [[r] for r in rows]
    else:  # a decomposition is one memory listing its steps
        steps = "; ".join(f"{hhmm(r.start)} {r.description}" for r in rows)
        gist = _first_words("; ".join(dict.fromkeys(r.description for r in rows)), GIST_WORDS)
        memories = [
            NewMemory(
                "plan",
                f"{name} plans, at {rows[0].location}: {steps}",
                PLAN_IMPORTANCE,
                gist=f"plans, at {rows[0].location}: {gist}",
            )
        ]
        groups = [rows]
    return groups, await tick.stream(resident).record(tick.session, memories, tick.now)


def _first_words(text: str, words: int) -> str:
    found = text.split()
    return " ".join(found[:words]).rstrip(";,") if len(found) > words else text

"""Game time: the town's own clock, as timezone-aware UTC datetimes; and waiting for a moment
of real time."""

from __future__ import annotations

import asyncio
import time as wall
from datetime import UTC, date, datetime, time, timedelta

from town.text import echoed
from town.world.persona import clock_time


def at_clock(day: date, clock: str) -> datetime:
    """``day`` at ``"HH:MM"`` of game time."""
    return datetime.combine(day, clock_time(clock), tzinfo=UTC)


def hhmm(at: datetime) -> str:
    return at.strftime("%H:%M")


def spoken_day(day: date) -> str:
    return f"{day:%A} {day:%B} {day.day}, {day.year}"


def parse_game_time(text: str) -> datetime:
    """``"2023-02-13 07:00"`` (or ISO) -> an aware game time; a clear ValueError otherwise."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{echoed(text)!r} is not a game time like '2023-02-13 07:00'") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def minutes_between(start: datetime, end: datetime) -> int:
    return int((end - start) / timedelta(minutes=1))


def midnight_after(at: datetime) -> datetime:
    return datetime.combine(at.date() + timedelta(days=1), time(0), tzinfo=UTC)


async def sleep_until(deadline: float) -> None:
    """Wait until ``time.monotonic()`` reaches ``deadline``, never less: an event loop's timer
    may fire a little early (within the loop's clock resolution), and then it waits again."""
    left = deadline - wall.monotonic()
    while left > 0:
        await asyncio.sleep(left)
        left = deadline - wall.monotonic()

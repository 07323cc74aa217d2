"""Happenings in a day plan: a resident who has heard of an event today (a party at a place,
from one time to another) plans to be there, and its host plans to host it.

The event is read from the plan's inputs (the summary and what the resident has heard, passed
with "yesterday"): "... Valentine's Day party at Hobbs Cafe on February 14 from 5 pm to 7 pm".
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from datetime import datetime

from town.llm import schemas as s
from town.llm.offline.text import first_name
from town.llm.schemas import clock, minutes

DAY = 24 * 60
MAX_CHUNKS = 8
_EVENT = re.compile(
    r"(?P<what>(?:[A-Z][\w']*\s+)*(?:party|celebration|festival|concert|meeting|dinner))"
    r" at (?P<where>[A-Z][\w' ]*?[\w']) on (?P<month>[A-Z][a-z]+) (?P<day>\d{1,2})"
    r" from (?P<start>\d{1,2}(?::\d\d)?\s*[ap]m) to (?P<end>\d{1,2}(?::\d\d)?\s*[ap]m)"
)
_GIVING = r"(?:planning|hosting|throwing|organi[sz]ing|giving)"
_HOURS = re.compile(r"(\d{1,2})(?::(\d\d))?\s*([ap])m")
# what time it is, as the town tells a resident (town.inputs.chat.situation, query.interview)
NOW = re.compile(r"It is \w+ (?P<day>[A-Z][a-z]+ \d{1,2}), \d{4}, (?P<h>\d\d):(?P<m>\d\d)\.")


@dataclass(frozen=True)
class Happening:
    """An event a text tells of: what, where, its day ("February 14") and its minutes."""

    what: str
    where: str
    day: str
    start: int
    end: int

    def begun(self, day: str, minute: int) -> bool:
        """Has it begun by ``day`` at ``minute`` (news of it is old then)?"""
        return self.when(day, minute) != "before"

    def when(self, day: str, minute: int) -> str:
        """Where ``day`` at ``minute`` falls: "before" the event, while it is "on", or "over"."""
        now, then = (datetime.strptime(f"{d} 2000", "%B %d %Y") for d in (day, self.day))
        if (now, minute) < (then, self.start):
            return "before"
        return "on" if now == then and minute < self.end else "over"

    def told(self, day: str, minute: int, host: bool, here: str = "") -> str:
        """The event as someone at ``here`` tells of it at ``day`` and ``minute``, once begun."""
        whose = f"My {self.what}" if host else f"The {self.what}"
        if self.when(day, minute) == "on":
            where = "here" if here == self.where else f"at {self.where}"
            return f"{whose} is on right now {where}! It runs until {_spoken(self.end)}."
        on = "today" if day == self.day else f"on {self.day}"
        hours = f"from {_spoken(self.start)} to {_spoken(self.end)}"
        return f"{whose} at {self.where} was {on}, {hours}; it's over now."


def happenings(text: str) -> list[Happening]:
    """The events a text tells of ("... party at Hobbs Cafe on February 14 from 5 pm to 7 pm")."""
    return [
        Happening(
            f["what"],
            f["where"],
            f"{f['month']} {f['day']}",
            _minute(f["start"]),
            _minute(f["end"]),
        )
        for f in _EVENT.finditer(text)
    ]


def now_in(text: str) -> tuple[str, int] | None:
    """The day ("February 14") and minute of the day a text says it is ("It is ...")."""
    found = NOW.search(text)
    return (found["day"], int(found["h"]) * 60 + int(found["m"])) if found else None


def _spoken(minute: int) -> str:
    hour, past = divmod(minute, 60)
    return f"{hour % 12 or 12}{f':{past:02d}' if past else ''} {'am' if hour < 12 else 'pm'}"


def _minute(spoken: str) -> int:
    found = _HOURS.match(spoken)
    assert found is not None
    hour = int(found.group(1)) % 12 + (12 if found.group(3) == "p" else 0)
    return hour * 60 + int(found.group(2) or 0)


def _hosts(before: str, resident: str, own: bool) -> bool:
    """Does the text before an event's name say the resident is the one giving it ("Isabella
    is planning a ...", or "I'm planning a ..." in the resident's own words)?"""
    who = rf"(?:{re.escape(resident)}|{re.escape(first_name(resident))}) is"
    if own:
        who = rf"(?:{who}|I'm|I am)"
    return bool(re.search(rf"\b{who} {_GIVING} (?:a|an|the|her|his|my) $", before))


def event_today(inputs: s.PlanDayInput) -> tuple[str, str, int, int] | None:
    """(what the resident will be doing, where, start, end in minutes of the day) of the first
    event on the plan's date that its inputs tell of; None if there is none."""
    for text in [inputs.summary, *inputs.yesterday.splitlines()]:
        for found in _EVENT.finditer(text):
            if f"{found['month']} {found['day']}," not in inputs.date + ",":
                continue
            what, where = found["what"], found["where"]
            before = text[: found.start()]
            # (inside what the resident said itself, "I'm planning" is the resident giving it)
            own = re.search(rf'{re.escape(inputs.resident)} said[^"]*: "[^"]*$', before)
            if re.search(r'\(a visitor[^)]*\) said[^"]*: "[^"]*$', before):
                continue  # a visitor's claim: told as theirs, never planned around
            host = _hosts(before, inputs.resident, own is not None)
            doing = f"hosting the {what}" if host else f"going to the {what}"
            start, end = _minute(found["start"]), _minute(found["end"])
            if end > start:
                return doing, where, start, end
    return None


def with_event(inputs: s.PlanDayInput, chunks: list[s.PlanItem]) -> list[s.PlanItem]:
    """The day plan with today's event in it (the chunks it overlaps cut short or moved)."""
    found = event_today(inputs)
    if found is None or not chunks:
        return chunks
    doing, where, start, end = found
    wake = minutes(chunks[0].start)
    begin, finish = (start - wake) % DAY, (end - wake) % DAY
    if finish <= begin or begin == 0:
        return chunks
    timed = [((minutes(c.start) - wake) % DAY, c) for c in chunks]
    kept: list[tuple[int, s.PlanItem]] = [(t, c) for t, c in timed if t < begin]
    after = [(t, c) for t, c in timed if t >= finish]
    inside = [c for t, c in timed if begin <= t < finish]
    resumed = inside[-1] if inside else (kept[-1][1] if kept else chunks[-1])
    if not after or after[0][0] > finish:
        after.insert(0, (finish, resumed))
    event = s.PlanItem(start=clock(wake + begin), duration_min=1, location=where, description=doing)
    items = [*kept, (begin, event), *after]
    while len(items) > MAX_CHUNKS:  # the shortest chunk (not the event, first or last) goes
        lengths = [b[0] - a[0] for a, b in itertools.pairwise(items)]
        drop = min(
            (i for i in range(1, len(items) - 1) if items[i][1] is not event),
            key=lambda i: lengths[i],
        )
        items.pop(drop)
    ends = [t for t, _ in items[1:]] + [DAY]
    return [
        c.model_copy(update={"start": clock(wake + t), "duration_min": e - t})
        for (t, c), e in zip(items, ends, strict=True)
    ]

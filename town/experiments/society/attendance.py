"""Where residents were (the replay's events, conversations) and who came to an event."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from town.outbox.replays import replay_parts
from town.store.models import Conversation
from town.world.persona import Event
from town.world.places import World


@dataclass
class Attendance:
    event: str
    name: str
    location: str
    start: datetime
    end: datetime
    host: str
    present: list[str]  # everyone seen there during its hours, host left out
    invited: list[str]  # knew the event's fact at the end, host left out
    attended: list[str]  # invited and present
    source: str


def aware(at: datetime) -> datetime:
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def read_replay(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The replay's events (its past days' files first: ``town.outbox.replays``), and how many
    lines could not be read (they are skipped)."""
    events: list[dict[str, Any]] = []
    bad = 0
    for part in replay_parts(path) or [path]:  # (a missing file: its error)
        with part.open(encoding="utf-8") as lines:
            for line in lines:
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                    item["at"] = aware(datetime.fromisoformat(item["at"]))
                except (ValueError, KeyError, TypeError):
                    bad += 1
                    continue
                if isinstance(item, dict):
                    events.append(item)
    return events, bad


def whereabouts(events: Iterable[Mapping[str, Any]]) -> dict[str, list[tuple[datetime, str]]]:
    """Each resident's (time, area) from the replay's ``moved`` (arrivals) and ``action``
    (location) events, in time order; a departure's ``from`` gives where it was before."""
    seen: dict[str, list[tuple[datetime, str]]] = {}
    for event in sorted(events, key=lambda e: e["at"]):
        who = event.get("resident") or ""
        if not who:
            continue
        at: datetime = event["at"]
        place = ""
        if event.get("kind") == "moved" and event.get("to"):
            track = seen.setdefault(who, [])
            if not track and event.get("from"):
                track.append((at, World.area_of(str(event["from"]))))
            place = str(event["to"])
        elif event.get("kind") == "action" and event.get("location"):
            place = str(event["location"])
        if place:
            seen.setdefault(who, []).append((at, World.area_of(place)))
    return seen


def present_at(
    track: Sequence[tuple[datetime, str]], area: str, start: datetime, end: datetime
) -> bool:
    """Was the resident in ``area`` at some moment of [start, end)? Each known place holds
    until the next one is known."""
    for i, (at, where) in enumerate(track):
        until = track[i + 1][0] if i + 1 < len(track) else None
        if where == area and at < end and (until is None or until > start):
            return True
    return False


def attendance(
    event: Event,
    residents: Sequence[str],
    invited: Sequence[str],
    tracks: Mapping[str, Sequence[tuple[datetime, str]]],
    conversations: Sequence[Conversation],
    source: str,
) -> Attendance:
    start, end = event.starts_at, event.ends_at
    area = World.area_of(event.location)
    here = {name for name in residents if present_at(tracks.get(name, ()), area, start, end)}
    for talk in conversations:
        began, ended = aware(talk.started), aware(talk.ended or talk.started)
        if World.area_of(talk.location) == area and began < end and ended >= start:
            here.update(p for p in talk.participants if p in residents)
    present = [n for n in residents if n in here and n != event.host]
    guests = [n for n in invited if n != event.host]
    return Attendance(
        event=event.id,
        name=event.name,
        location=area,
        start=start,
        end=end,
        host=event.host,
        present=present,
        invited=guests,
        attended=[n for n in guests if n in here],
        source=source,
    )

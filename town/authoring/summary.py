"""A checked town on one screen: places, residents, who knows whom, who lives and works where,
and what the scenario seeds."""

from __future__ import annotations

from town.world.persona import TownSpec


def knows(spec: TownSpec) -> dict[str, list[str]]:
    """Each resident's acquaintances: the other residents its seed phrases name (full or
    first name)."""
    found: dict[str, list[str]] = {}
    for resident in spec.residents:
        text = " ".join(resident.seed_phrases(spec.scenario))
        others = [r for r in spec.residents if r.name != resident.name]
        found[resident.name] = [
            r.name
            for r in others
            if r.name in text or f" {r.first_name} " in f" {text.replace(',', ' ')} "
        ]
    return found


def summary_lines(spec: TownSpec) -> list[str]:
    places = len(spec.paths()) - len(spec.areas)
    objects = sum(1 for _ in spec.objects())
    lines = [
        f"{spec.name}: {len(spec.areas)} places ({places} sub-areas, {objects} objects), "
        f"{len(spec.residents)} residents",
        "places: "
        + "; ".join(
            f"{a.name} ({', '.join(s.name for s in a.sub_areas)})"
            + (f" {a.opens}-{a.closes}" if a.opens else "")
            for a in spec.areas
        ),
    ]
    acquaintances = knows(spec)
    for resident in spec.residents:
        work = resident.workplace or "no workplace"
        who = ", ".join(acquaintances[resident.name]) or "nobody yet"
        lines.append(
            f"{resident.avatar_emoji} {resident.name} ({resident.age}, {resident.occupation}): "
            f"lives at {resident.home}, works at {work}, {resident.wake_time}-"
            f"{resident.sleep_time}; knows {who}"
        )
    scenario = spec.scenario
    lines.append(
        f"scenario {scenario.name!r}: starts {scenario.start:%Y-%m-%d %H:%M}, "
        f"{scenario.minutes_per_tick} min a tick, {scenario.days} day(s)"
    )
    lines += [f"  fact {f.id!r}: {f.resident} knows that {f.phrase}" for f in scenario.facts]
    lines += [
        f"  event {e.id!r}: {e.name} at {e.location}, {e.date} {e.start}-{e.end}"
        + (f", hosted by {e.host}" if e.host else "")
        for e in scenario.events
    ]
    return lines

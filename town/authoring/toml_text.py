"""A drafted town written as the TOML a person edits: the three files' text, commented."""

from __future__ import annotations

import json

from town.authoring import draft_schemas as d

START = "2024-06-03 07:00"  # a Monday morning; the scenario's event is the next day
EVENT_DATE = "2024-06-04"


def toml_str(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's; DEL is dropped)."""
    return json.dumps(text.replace("\x7f", ""), ensure_ascii=False)


def _list(items: list[str]) -> str:
    return "[" + ", ".join(toml_str(i) for i in items) + "]"


def _header(description: str, what: str) -> list[str]:
    return [
        f"# {what}, drafted by `bottown town draft` from:",
        f"#   {' '.join(description.split())[:200]}",
        "# Edit freely, then run `bottown town check FOLDER`. (`bottown town new` writes a",
        "# scaffold whose every field is explained in a comment.)",
        "",
    ]


def town_toml(description: str, places: d.DraftPlaces) -> str:
    lines = _header(description, "The places")
    lines += [f"name = {toml_str(places.town_name)}"]
    lines += [f"description = {toml_str(places.town_description)}"]
    for area in places.areas:
        lines += ["", "[[areas]]", f"name = {toml_str(area.name)}"]
        lines += [f"description = {toml_str(area.description)}"]
        if area.opens or area.closes:
            lines += [f"opens = {toml_str(area.opens)}", f"closes = {toml_str(area.closes)}"]
        for sub in area.sub_areas:
            objects = ", ".join(f"{toml_str(o.name)} = {toml_str(o.state)}" for o in sub.objects)
            lines += ["", "[[areas.sub_areas]]", f"name = {toml_str(sub.name)}"]
            lines += [f"objects = {{ {objects} }}"]
    return "\n".join(lines) + "\n"


def _paragraph(phrases: list[str]) -> str:
    body = ";\n".join(toml_str(p)[1:-1] for p in phrases)
    return f'"""\n{body}\n"""'


def residents_toml(description: str, areas: list[str], people: list[d.DraftResident]) -> str:
    lines = _header(description, "The residents")
    for person in people:
        lines += [
            "[[residents]]",
            f"name = {toml_str(person.name)}",
            f"age = {person.age}",
            f"traits = {_list(list(person.traits))}",
            f"occupation = {toml_str(person.occupation)}",
            f"paragraph = {_paragraph(list(person.seeds))}",
            f"home = {toml_str(person.home)}",
            f"workplace = {toml_str(person.workplace)}",
            f"known_places = {_list(areas)}",
            f"wake_time = {toml_str(person.wake_time)}",
            f"sleep_time = {toml_str(person.sleep_time)}",
            f"routine = {_list(list(person.routine))}",
            f"avatar_emoji = {toml_str(person.avatar_emoji)}",
            "",
        ]
    return "\n".join(lines)


def event_end(event: d.DraftEvent) -> str:
    """The hour the event ends: its start and its hours (the draft's events end by 23:00)."""
    hour = min(23, int(event.start[:2]) + event.hours)
    return f"{hour:02d}:{event.start[3:5] or '00'}"


def scenario_toml(description: str, scenario: d.DraftScenarioResult) -> str:
    fact, event = scenario.fact, scenario.event
    lines = _header(description, "The scenario")
    lines += [
        f"name = {toml_str(scenario.name)}",
        f"description = {toml_str(scenario.description)}",
        f"start = {toml_str(START)}",
        "minutes_per_tick = 10",
        "days = 2",
        "",
        "[[facts]]",
        'id = "news"',
        f"resident = {toml_str(fact.resident)}",
        f"phrase = {toml_str(fact.phrase)}",
        f"question = {toml_str(fact.question)}",
        f"keywords = {_list(list(fact.keywords))}",
        "",
        "[[events]]",
        'id = "event"',
        f"name = {toml_str(event.name)}",
        f"host = {toml_str(fact.resident)}",
        f"location = {toml_str(event.location)}",
        f"date = {toml_str(EVENT_DATE)}",
        f"start = {toml_str(event.start)}",
        f"end = {toml_str(event_end(event))}",
        'fact = "news"',
        "",
    ]
    return "\n".join(lines)

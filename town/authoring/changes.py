"""What an edited town folder changes in a living town, and what cannot be applied live.

Residents are matched by name, places by path: a renamed place is a place removed and another
added, which is refused while anyone is in it (they would stand nowhere). A resident who is no
longer in the folder moves away (its row and memories are kept, see ``MOVED_AWAY``); one who
comes back moves in again with its memories. A resident's new seed phrases (a changed persona
paragraph, a new scenario fact) become new seed memories.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from town.world.persona import ResidentSpec, TownSpec, WorldObjectSpec, split_path


@dataclass
class Changes:
    spec: TownSpec  # the folder's town, as it will be
    moving_in: list[ResidentSpec] = field(default_factory=list)
    moving_back: list[ResidentSpec] = field(default_factory=list)  # who moved away before
    moving_away: list[str] = field(default_factory=list)
    new_memories: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)
    persona_changed: list[str] = field(default_factory=list)
    new_places: list[str] = field(default_factory=list)  # areas and "area: sub-area" paths
    new_objects: list[tuple[str, WorldObjectSpec]] = field(default_factory=list)
    gone_places: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The changes in words, one a line."""
        found = [f"{name} moves in" for name in (r.name for r in self.moving_in)]
        found += [f"{r.name} moves back in, remembering everything" for r in self.moving_back]
        found += [f"{name} moves away (memories kept)" for name in self.moving_away]
        found += [
            f"{name} gets {len(phrases)} new seed memor{'y' if len(phrases) == 1 else 'ies'}"
            for name, phrases in self.new_memories.items()
        ]
        found += [f"new place: {path}" for path in self.new_places]
        found += [
            f"new object: {place}: {obj.name} ({obj.state})" for place, obj in self.new_objects
        ]
        found += [f"no longer a place: {path} (nobody is there)" for path in self.gone_places]
        return found + self.notes


def plan_changes(
    old: TownSpec,
    new: TownSpec,
    where: dict[str, str],
    away: set[str],
    places: set[str] | None = None,
) -> Changes:
    """The changes from ``old`` (the town as last applied) to ``new``, given the store: where
    each resident living there is now (``where``: name -> location path), who has moved away
    before (``away``) and the places it has (``places``; default: ``old``'s). Who lives there
    and which places exist are taken from the store, so a town whose folder was edited before
    its first update still gets every newcomer and place."""
    changes = Changes(new)
    before = {r.name: r for r in old.residents}
    for person in new.residents:
        if person.name in away:
            changes.moving_back.append(person)
        elif person.name not in where:
            changes.moving_in.append(person)
        elif person.name in before:
            _changed_person(changes, before[person.name], person, old, new)
    staying = {r.name for r in new.residents}
    changes.moving_away = [name for name in where if name not in staying]
    _changed_places(changes, old, new, where, staying)
    if places is not None:
        changes.new_places = [p for p in new.paths() if p not in places]
    if (old.scenario.start, old.scenario.minutes_per_tick) != (
        new.scenario.start,
        new.scenario.minutes_per_tick,
    ):
        changes.notes.append(
            "scenario start and minutes_per_tick apply when a town is founded; a living town "
            "keeps its clock (use `speed` for the pace)"
        )
    return changes


def _changed_person(
    changes: Changes, was: ResidentSpec, now: ResidentSpec, old: TownSpec, new: TownSpec
) -> None:
    known = set(was.seed_phrases(old.scenario)) | set(was.private_phrases())
    fresh = [(p, False) for p in now.seed_phrases(new.scenario) if p not in known]
    fresh += [(p, True) for p in now.private_phrases() if p not in known]
    if fresh:
        changes.new_memories[now.name] = fresh
    if was != now:
        changes.persona_changed.append(now.name)


def _changed_places(
    changes: Changes, old: TownSpec, new: TownSpec, where: dict[str, str], staying: set[str]
) -> None:
    before, after = set(old.paths()), set(new.paths())
    changes.new_places = [p for p in new.paths() if p not in before]
    gone = [p for p in old.paths() if p not in after]
    refused: set[str] = set()
    for path in gone:
        parts = split_path(path)
        if len(parts) > 1 and parts[0] in gone:
            continue  # the whole area is gone: said once, for the area
        inside = sorted(
            name
            for name, at in where.items()
            if name in staying and split_path(at)[: len(parts)] == parts
        )
        if inside:
            refused.add(parts[0] if len(parts) == 1 else path)
            changes.refused.append(
                f"{path!r} is gone from town.toml (renamed or removed) while "
                f"{', '.join(inside)} {'is' if len(inside) == 1 else 'are'} there: name it "
                "as before, or apply the change when nobody is there"
            )
    changes.gone_places = [p for p in gone if p not in refused]
    had = {(place, obj.name) for place, obj in old.objects()}
    changes.new_objects = [
        (place, obj)
        for place, obj in new.objects()
        if (place, obj.name) not in had and place not in changes.new_places
    ]

"""``bottown town draft``: the LLM writes a town in small pieces (an outline naming the town and
its places, then each place, each resident given the residents drafted so far, then the
scenario), each piece's schema small and bounded so that even a tiny local model finishes it.
The pieces are assembled into the three files and checked by the loader; each problem goes back
to the piece it is about, for at most two repair rounds. A draft that still has problems is
written nowhere.

What the model writes thin is filled from the offline brain's scaffold so that the loader
passes (a resident's third seed phrase, the last steps of its routine, a missing closing hour);
:attr:`Draft.filled` says which fields, and :attr:`Draft.offline` which whole pieces the
gateway's offline fallback drafted."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from town.authoring import draft_offline as offline
from town.authoring import draft_schemas as d
from town.authoring import toml_text
from town.authoring.draft_tasks import DRAFT_OUTLINE, DRAFT_PLACE, DRAFT_RESIDENT, DRAFT_SCENARIO
from town.llm.port import Brain, OfflineBrain
from town.llm.task import I, R, Task
from town.world.load import load_town
from town.world.persona import (
    MIN_SEED_PHRASES,
    RESIDENTS_FILE,
    SCENARIO_FILE,
    TOWN_FILE,
    PersonaError,
    TownSpec,
)

T = TypeVar("T", d.DraftSubArea, d.DraftObject)
REPAIR_ROUNDS = 2
MOST_HOMES = 4  # a home area's sub-areas at most; more residents share homes
_INDEX = re.compile(r"^(areas|residents)\[(\d+)\]")


class OfflineStandIn:
    """The gateway's fallback while drafting: the offline brain's draft of a piece, noted, so
    that the command can say which pieces the LLM did not write."""

    name = "offline"

    def __init__(self) -> None:
        self.used: list[str] = []
        self._brain = OfflineBrain()

    async def run(self, task: Task[I, R], inputs: I, *, resident: str | None = None) -> R:
        self.used.append(task.name)
        return await self._brain.run(task, inputs, resident=resident)


@dataclass
class Draft:
    """A drafted town: its files' text, and the spec if the loader passed it (else its
    problems), after ``rounds`` repair rounds of ``calls`` piece calls; ``filled`` names the
    fields filled from the offline scaffold, ``offline`` the pieces the fallback drafted."""

    files: dict[str, str]
    spec: TownSpec | None
    problems: list[str]
    rounds: int
    calls: int = 0
    filled: list[str] = field(default_factory=list)
    offline: list[str] = field(default_factory=list)


async def draft_town(
    brain: Brain,
    description: str,
    *,
    residents: int = 3,
    places: int = 3,
    rounds: int = REPAIR_ROUNDS,
    fallback: OfflineStandIn | None = None,
) -> Draft:
    """Ask ``brain`` for the town piece by piece (``places`` counts the residents' homes as
    one), check it with the loader, and send each problem back to its piece for at most
    ``rounds`` repair rounds; ``fallback`` is the gateway's, to name the pieces it drafted."""
    description = " ".join(description.split())
    if not description:
        raise ValueError("describe the town: --describe 'a harbour town with a lighthouse'")
    drafter = _Drafter(brain, description, residents, places - 1, fallback)
    await drafter.outline()
    for index in range(places):
        await drafter.place(index)
    for index in range(residents):
        await drafter.resident(index)
    await drafter.scenario()
    draft = drafter.check(0)
    while draft.problems and draft.rounds < rounds:
        await drafter.repair(draft.problems)
        draft = drafter.check(draft.rounds + 1)
    return draft


def _pieces(problems: list[str]) -> dict[tuple[str, int], list[str]]:
    """Each problem under the piece it is about: ``("place", i)``, ``("resident", i)``,
    ``("outline", 0)``, ``("scenario", 0)`` (a resident's file-wide problem: every resident)."""
    found: dict[tuple[str, int], list[str]] = {}
    for problem in problems:
        file, _, rest = problem.partition(": ")
        index = _INDEX.match(rest)
        if file == SCENARIO_FILE:
            key = ("scenario", 0)
        elif index is not None:
            key = ("place" if index.group(1) == "areas" else "resident", int(index.group(2)))
        elif file == RESIDENTS_FILE:
            key = ("resident", -1)
        else:
            key = ("outline", 0)
        found.setdefault(key, []).append(problem)
    return found


def _once(items: Iterable[T]) -> list[T]:
    """The items whose name was not given before (case aside), in order: a tiny model repeats
    itself, and a sub-area or object named twice is simply kept once."""
    seen: dict[str, T] = {}
    for item in items:
        seen.setdefault(item.name.casefold(), item)
    return list(seen.values())


@dataclass
class _Drafter:
    brain: Brain
    description: str
    residents_wanted: int
    public: int  # public places; the homes are one place more
    fallback: OfflineStandIn | None
    calls: int = 0
    town: d.DraftOutlineResult | None = None
    places: dict[int, d.DraftPlaceResult] = field(default_factory=dict)
    people: dict[int, d.DraftResidentResult] = field(default_factory=dict)
    story: d.DraftScenarioResult | None = None
    offline: list[str] = field(default_factory=list)
    renamed: list[str] = field(default_factory=list)

    async def _ask(self, label: str, task: Task[I, R], inputs: I) -> R:
        used = len(self.fallback.used) if self.fallback is not None else 0
        self.calls += 1
        result = await self.brain.run(task, inputs)
        if self.fallback is not None and len(self.fallback.used) > used:
            self.offline.append(label)
        return result

    @staticmethod
    def _repair(problems: list[str] | None, previous: BaseModel | None) -> d.DraftRepair:
        if not problems or previous is None:
            return d.DraftRepair()
        return d.DraftRepair(problems=problems, previous=previous.model_dump_json())

    @property
    def outlined(self) -> d.DraftOutlineResult:
        assert self.town is not None, "the outline comes first"
        return self.town

    def _names(self) -> list[str]:
        return [*self.outlined.places, self.outlined.street]

    async def outline(self, problems: list[str] | None = None) -> None:
        inputs = d.DraftOutlineInput(
            description=self.description,
            places=self.public,
            named=offline.noun_phrases(self.description)[1 : self.public + 1],
            repair=self._repair(problems, self.town),
        )
        town = await self._ask("the outline", DRAFT_OUTLINE, inputs)
        self.town = self._distinct(town, OfflineBrain().answer(DRAFT_OUTLINE, inputs))

    def _distinct(
        self, town: d.DraftOutlineResult, spare: d.DraftOutlineResult
    ) -> d.DraftOutlineResult:
        """The outline with a place named twice (a tiny model repeats itself) named as the
        offline outline names it, noted as filled."""
        self.renamed = []
        names = [*town.places, town.street]
        spares = iter(
            n
            for n in [*spare.places, spare.street, *(f"Place {i}" for i in range(2, 99))]
            if n.casefold() not in {x.casefold() for x in names}
        )
        seen: set[str] = set()
        for index, name in enumerate(names):
            if name.casefold() in seen:
                names[index] = next(spares)
                self.renamed.append(f"{TOWN_FILE}: areas[{index}].name")
            seen.add(names[index].casefold())
        return town.model_copy(update={"places": names[:-1], "street": names[-1]})

    async def place(self, index: int, problems: list[str] | None = None) -> None:
        names = self._names()
        homes = min(self.residents_wanted, MOST_HOMES) if index == self.public else 0
        inputs = d.DraftPlaceInput(
            description=self.description,
            town_name=self.outlined.town_name,
            name=names[index],
            others=[n for i, n in enumerate(names) if i != index],
            homes=homes,
            repair=self._repair(problems, self.places.get(index)),
        )
        self.places[index] = await self._ask(f"place {names[index]}", DRAFT_PLACE, inputs)

    def _paths(self, index: int) -> list[str]:
        name = self._names()[index]
        return [f"{name}: {s.name}" for s in self.places[index].sub_areas]

    def _homes_for(self, index: int) -> list[str]:
        """The homes, the least taken first (the others' homes, not this resident's own)."""
        homes = self._paths(self.public)
        taken = [p.home for i, p in self.people.items() if i != index]
        return sorted(homes, key=lambda home: taken.count(home))

    async def resident(self, index: int, problems: list[str] | None = None) -> None:
        others = [p.name for i, p in sorted(self.people.items()) if i != index]
        inputs = d.DraftResidentInput(
            description=self.description,
            town_name=self.outlined.town_name,
            drafted=others,
            homes=self._homes_for(index),
            places=[path for i in range(self.public) for path in self._paths(i)],
            repair=self._repair(problems, self.people.get(index)),
        )
        self.people[index] = await self._ask(f"resident {index + 1}", DRAFT_RESIDENT, inputs)

    async def scenario(self, problems: list[str] | None = None) -> None:
        inputs = d.DraftScenarioInput(
            description=self.description,
            town_name=self.outlined.town_name,
            residents=[p.name for _, p in sorted(self.people.items())],
            areas=self.outlined.places,
            repair=self._repair(problems, self.story),
        )
        self.story = await self._ask("the scenario", DRAFT_SCENARIO, inputs)

    async def repair(self, problems: list[str]) -> None:
        """One repair round: each piece with problems drafted again, given them; what names
        a renamed piece is drafted again too (the outline: everything; a resident: the
        scenario, if it names the old name)."""
        pieces = _pieces(problems)
        if ("outline", 0) in pieces:
            await self.outline(pieces.pop(("outline", 0)))
            pieces = (
                {("place", i): [] for i in self.places}
                | {("resident", i): [] for i in self.people}
                | {("scenario", 0): []}
                | pieces
            )
        for (piece, index), about in pieces.items():
            if piece == "place" and index in self.places:
                await self.place(index, about)
            elif piece == "resident":
                for i in [index] if index in self.people else sorted(self.people):
                    await self.resident(i, about)
        names = {p.name for p in self.people.values()}
        story = self.story
        if ("scenario", 0) in pieces or (story is not None and story.fact.resident not in names):
            renamed = [f"{SCENARIO_FILE}: facts[0].resident: name one of the residents"]
            await self.scenario(pieces.get(("scenario", 0)) or renamed)

    def assemble(self) -> tuple[d.DraftPlaces, list[d.DraftResident], list[str]]:
        """The pieces as the files' content, and the fields filled from the scaffold."""
        filled: list[str] = list(self.renamed)
        areas = []
        for index, name in enumerate(self._names()):
            place = self.places[index]
            opens, closes = place.opens, place.closes
            if bool(opens) != bool(closes):
                opens, closes = opens or "08:00", closes or "18:00"
                filled.append(f"town.toml: areas[{index}].{'closes' if place.opens else 'opens'}")
            subs = [
                s.model_copy(update={"objects": _once(s.objects)}) for s in _once(place.sub_areas)
            ]
            areas.append(
                d.DraftArea(
                    name=name,
                    description=place.description,
                    opens=opens,
                    closes=closes,
                    sub_areas=subs,
                )
            )
        town = d.DraftPlaces(
            town_name=self.outlined.town_name,
            town_description=self.outlined.town_description,
            areas=areas,
        )
        return town, self._residents(filled), filled

    def _residents(self, filled: list[str]) -> list[d.DraftResident]:
        ties: dict[str, list[str]] = {}  # who knows whom, from both sides
        names = {p.name for p in self.people.values()}
        for _, person in sorted(self.people.items()):
            if person.knows in names and person.knows != person.name:
                how = f", {person.knows_as}" if person.knows_as else ""
                ties.setdefault(person.name, []).append(f"{person.name} knows {person.knows}{how}")
                ties.setdefault(person.knows, []).append(f"{person.knows} knows {person.name}")
        people = []
        for index, person in sorted(self.people.items()):
            own = [*person.about, *ties.get(person.name, [])]
            seeds = offline.seeds_filled(person, self.outlined.town_name, own)
            routine = offline.routine_filled(person)
            where = f"residents.toml: residents[{index}]"
            if len(own) < MIN_SEED_PHRASES:
                filled.append(f"{where}.paragraph ({len(seeds) - len(own)} phrase(s))")
            if len(person.routine) < len(routine):
                filled.append(f"{where}.routine ({len(routine) - len(person.routine)} step(s))")
            data = person.model_dump(include=set(d.DraftResident.model_fields))
            people.append(d.DraftResident(**{**data, "seeds": seeds, "routine": routine}))
        return people

    def files(self) -> tuple[dict[str, str], list[str]]:
        assert self.story is not None, "the scenario comes last"
        town, people, filled = self.assemble()
        names = [a.name for a in town.areas]
        files = {
            TOWN_FILE: toml_text.town_toml(self.description, town),
            RESIDENTS_FILE: toml_text.residents_toml(self.description, names, people),
            SCENARIO_FILE: toml_text.scenario_toml(self.description, self.story),
        }
        return files, filled

    def check(self, rounds: int) -> Draft:
        """The files as the loader sees them (from a scratch folder)."""
        files, filled = self.files()
        with tempfile.TemporaryDirectory(prefix="bottown-draft-") as scratch:
            for name, text in files.items():
                (Path(scratch) / name).write_text(text, "utf-8")
            try:
                spec, problems = load_town(Path(scratch)), []
            except PersonaError as error:
                spec, problems = None, error.problems
        return Draft(files, spec, problems, rounds, self.calls, filled, list(self.offline))

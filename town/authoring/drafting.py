"""``bottown town draft``: the LLM writes a town one file at a time (places, then residents,
then the scenario), and the loader's problems go back to it for at most two repair rounds.
A draft that still has problems is written nowhere."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from town.authoring import draft_schemas as d
from town.authoring import toml_text
from town.authoring.draft_tasks import DRAFT_PLACES, DRAFT_RESIDENTS, DRAFT_SCENARIO
from town.llm.offline.brain import OfflineBrain
from town.llm.port import Brain
from town.llm.task import I, R, Task
from town.world.load import load_town
from town.world.persona import (
    RESIDENTS_FILE,
    SCENARIO_FILE,
    TOWN_FILE,
    PersonaError,
    TownSpec,
)

REPAIR_ROUNDS = 2


class OfflineStandIn:
    """The gateway's fallback while drafting: the offline brain's draft of a file, noted, so
    that the command can say which files the LLM did not write."""

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
    problems), after ``rounds`` repair rounds."""

    files: dict[str, str]
    spec: TownSpec | None
    problems: list[str]
    rounds: int
    calls: int = 0
    results: dict[str, BaseModel] = field(default_factory=dict)


async def draft_town(
    brain: Brain,
    description: str,
    *,
    residents: int = 3,
    places: int = 3,
    rounds: int = REPAIR_ROUNDS,
) -> Draft:
    """Ask ``brain`` for the town's three files, check them with the loader, and send each
    file's problems back for at most ``rounds`` repair rounds."""
    description = " ".join(description.split())
    if not description:
        raise ValueError("describe the town: --describe 'a harbour town with a lighthouse'")
    drafter = _Drafter(brain, description, residents, places)
    await drafter.places()
    await drafter.residents()
    await drafter.scenario()
    draft = drafter.check(0)
    while draft.problems and draft.rounds < rounds:
        wrong = {problem.split(":", 1)[0] for problem in draft.problems}
        if TOWN_FILE in wrong:
            await drafter.places(_for(TOWN_FILE, draft.problems), drafter.results["places"])
        if RESIDENTS_FILE in wrong or TOWN_FILE in wrong:
            problems = _for(RESIDENTS_FILE, draft.problems)
            await drafter.residents(problems, drafter.results["residents"])
        if wrong & {TOWN_FILE, RESIDENTS_FILE, SCENARIO_FILE}:
            problems = _for(SCENARIO_FILE, draft.problems)
            await drafter.scenario(problems, drafter.results["scenario"])
        draft = drafter.check(draft.rounds + 1)
    return draft


def _for(file: str, problems: list[str]) -> list[str]:
    return [p for p in problems if p.startswith(f"{file}:")]


@dataclass
class _Drafter:
    brain: Brain
    description: str
    residents_wanted: int
    places_wanted: int
    results: dict[str, Any] = field(default_factory=dict)
    calls: int = 0

    def _repair(self, problems: list[str] | None, previous: BaseModel | None) -> d.DraftRepair:
        if not problems or previous is None:
            return d.DraftRepair()
        return d.DraftRepair(problems=problems, previous=previous.model_dump_json())

    async def places(
        self, problems: list[str] | None = None, previous: BaseModel | None = None
    ) -> None:
        inputs = d.DraftPlacesInput(
            description=self.description,
            places=self.places_wanted,
            homes=self.residents_wanted,
            repair=self._repair(problems, previous),
        )
        self.calls += 1
        self.results["places"] = await self.brain.run(DRAFT_PLACES, inputs)

    def _paths(self) -> tuple[list[str], list[str], list[str]]:
        """Every area, every sub-area path, and the homes (the last area's sub-areas)."""
        areas: list[d.DraftArea] = list(self.results["places"].areas)
        names = [a.name for a in areas]
        paths = [f"{a.name}: {s.name}" for a in areas for s in a.sub_areas]
        homes = [f"{areas[-1].name}: {s.name}" for s in areas[-1].sub_areas]
        return names, paths, homes

    async def residents(
        self, problems: list[str] | None = None, previous: BaseModel | None = None
    ) -> None:
        names, paths, homes = self._paths()
        inputs = d.DraftResidentsInput(
            description=self.description,
            town_name=self.results["places"].town_name,
            residents=self.residents_wanted,
            homes=homes,
            places=[*names[:-1], *paths],
            repair=self._repair(problems, previous),
        )
        self.calls += 1
        self.results["residents"] = await self.brain.run(DRAFT_RESIDENTS, inputs)

    async def scenario(
        self, problems: list[str] | None = None, previous: BaseModel | None = None
    ) -> None:
        names, _, _ = self._paths()
        inputs = d.DraftScenarioInput(
            description=self.description,
            town_name=self.results["places"].town_name,
            residents=[r.name for r in self.results["residents"].residents],
            areas=names,
            repair=self._repair(problems, previous),
        )
        self.calls += 1
        self.results["scenario"] = await self.brain.run(DRAFT_SCENARIO, inputs)

    def files(self) -> dict[str, str]:
        names, _, _ = self._paths()
        return {
            TOWN_FILE: toml_text.town_toml(self.description, self.results["places"]),
            RESIDENTS_FILE: toml_text.residents_toml(
                self.description, names, self.results["residents"]
            ),
            SCENARIO_FILE: toml_text.scenario_toml(self.description, self.results["scenario"]),
        }

    def check(self, rounds: int) -> Draft:
        """The files as the loader sees them (from a scratch folder)."""
        files = self.files()
        with tempfile.TemporaryDirectory(prefix="bottown-draft-") as scratch:
            for name, text in files.items():
                (Path(scratch) / name).write_text(text, "utf-8")
            try:
                spec, problems = load_town(Path(scratch)), []
            except PersonaError as error:
                spec, problems = None, error.problems
        return Draft(files, spec, problems, rounds, self.calls, dict(self.results))

"""Who runs mock interviews in a town: ``interviews.toml`` in its persona folder (optional).

Every interviewer is a resident who works in its interview room (an area of its own), hiring for
a company and a role, with a bank of questions by topic. ``load_interviews`` reads and checks the
file against the town already loaded, and reports every problem at once as
`interviews.toml: field path: reason` (a ``PersonaError``, as ``town.world.load`` does).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from town.world.load import (
    Places,
    duplicates,
    entry_values,
    not_resident,
    read_toml,
    town_folder,
    validate,
    validate_items,
)
from town.world.persona import (
    RESIDENTS_FILE,
    MaybeText,
    Name,
    PersonaError,
    Slug,
    Spec,
    Text,
    TownSpec,
    split_path,
)

INTERVIEWS_FILE = "interviews.toml"


def _one_question(value: str) -> str:
    if value.count("?") > 1:
        raise ValueError(f"asks {value.count('?')} questions; one question at a time")
    return value


class InterviewQuestion(Spec):
    """One question of an interviewer's bank; `follow_up` is asked when an answer is thin."""

    id: Slug
    topic: Name
    text: Annotated[Text, AfterValidator(_one_question)]
    follow_up: Annotated[MaybeText, AfterValidator(_one_question)] = ""


class InterviewerSpec(Spec):
    """A resident who runs mock interviews in a room (an area), for a company and a role."""

    resident: Name
    room: Name
    company: Text
    role: Text
    about: MaybeText = ""  # what the interviewer knows of the company and the role
    next_steps: Text  # what comes after the practice, said when a session closes
    session_minutes: int = Field(default=40, ge=5, le=240)  # game minutes
    questions_per_session: int = Field(default=4, ge=1, le=20)
    questions: list[InterviewQuestion] = Field(min_length=3)

    def topics(self) -> list[str]:
        """The bank's topics, in the order they first appear."""
        return list(dict.fromkeys(q.topic for q in self.questions))

    def question(self, question_id: str) -> InterviewQuestion | None:
        return next((q for q in self.questions if q.id == question_id), None)


class Interviews(Spec):
    """A town's interviewers (none: a town without interview rooms)."""

    interviewers: list[InterviewerSpec] = Field(default_factory=list)

    def interviewer(self, name: str) -> InterviewerSpec:
        """The interviewer with this (full or first) name; ``KeyError`` if there is none."""
        wanted = " ".join(name.split()).casefold()
        for spec in self.interviewers:
            if wanted in (spec.resident.casefold(), spec.resident.split()[0].casefold()):
                return spec
        raise KeyError(f"no interviewer named {name!r}")

    def interviewer_in(self, location: str) -> InterviewerSpec | None:
        """The interviewer whose room holds ``location`` (an area or a path inside it)."""
        area = split_path(location)[0].casefold() if location.strip() else ""
        return next((i for i in self.interviewers if i.room.casefold() == area), None)


class _InterviewsFile(Spec):
    interviewers: list[dict[str, Any]] = Field(min_length=1)


def load_interviews(name_or_path: str | Path, town: TownSpec) -> Interviews:
    """The interviewers of the town folder ``name_or_path`` (``town`` is its loaded spec); none
    when it has no ``interviews.toml``. Raises ``PersonaError`` listing every problem."""
    folder = town_folder(name_or_path)
    if not (folder / INTERVIEWS_FILE).is_file():
        return Interviews()
    problems: list[str] = []
    raw = read_toml(folder, INTERVIEWS_FILE, problems)
    validate(_InterviewsFile, raw, INTERVIEWS_FILE, "", problems)
    found = validate_items(InterviewerSpec, raw, "interviewers", INTERVIEWS_FILE, problems)
    for field in ("resident", "room"):
        for i, value, j in duplicates(entry_values(raw, "interviewers", field) or []):
            problems.append(
                f"{INTERVIEWS_FILE}: interviewers[{i}].{field}: {value!r} is already used by "
                f"interviewers[{j}]"
            )
    _check_interviewers(found, town, problems)
    if problems:
        raise PersonaError(str(name_or_path), problems)
    return Interviews(interviewers=[spec for _, spec in found])


def _check_interviewers(
    interviewers: list[tuple[int, InterviewerSpec]], town: TownSpec, problems: list[str]
) -> None:
    """Each interviewer is a resident who works in its room, an area of town.toml; its bank has
    unique ids and enough questions for a session."""
    names = {r.name for r in town.residents}
    places = Places.build(list(enumerate(a.name for a in town.areas)), town.areas)
    for i, spec in interviewers:
        where = f"{INTERVIEWS_FILE}: interviewers[{i}]"
        if spec.resident not in names:
            problems.append(f"{where}.resident: {not_resident(spec.resident, names)}")
        if reason := places.problem(spec.room, depth=1):
            problems.append(f"{where}.room: {reason}")
        person = next((r for r in town.residents if r.name == spec.resident), None)
        work = split_path(person.workplace)[0] if person and person.workplace else ""
        if person is not None and work.casefold() != spec.room.casefold():
            problems.append(
                f"{where}.room: {spec.resident} works in {work or 'no workplace'!r} "
                f"({RESIDENTS_FILE}), not in {spec.room!r}; an interviewer's workplace is its room"
            )
        for k, question_id, j in duplicates(list(enumerate(q.id for q in spec.questions))):
            problems.append(f"{where}.questions[{k}].id: {question_id!r} is already questions[{j}]")
        if spec.questions_per_session > len(spec.questions):
            problems.append(
                f"{where}.questions_per_session: {spec.questions_per_session} is more than the "
                f"{len(spec.questions)} questions in the bank"
            )

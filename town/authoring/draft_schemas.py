"""What the LLM is asked for when it drafts a town, one file at a time: the inputs of each
draft task and its result model. Patterns use simple character classes only (a grammar engine
takes them), every text has a cap, and names never hold the ":" of place paths."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from town.llm.caps import capped

_CLOCK = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
_MAYBE_CLOCK = r"^(([01][0-9]|2[0-3]):[0-5][0-9])?$"


def _cap(limit: int) -> BeforeValidator:
    return BeforeValidator(lambda v: capped(v, limit))


def _fits(limit: int, pattern: str = r"^[^:;]+$", shortest: int = 1) -> Any:
    """Text of ``shortest`` to ``limit`` characters matching ``pattern``; the pattern is also
    written into the schema by hand (pydantic leaves it out beside a before-validator)."""
    return Field(
        min_length=shortest,
        max_length=limit,
        pattern=pattern,
        json_schema_extra={"pattern": pattern},
    )


PlaceName = Annotated[str, _cap(40), _fits(40, r"^[A-Za-z][A-Za-z0-9' -]*$", 2)]
PersonName = Annotated[str, _cap(40), _fits(40, r"^[A-Z][a-z]+ [A-Z][a-z]+$", 3)]
State = Annotated[str, _cap(40), _fits(40)]
Phrase = Annotated[str, _cap(160), _fits(160)]  # one seed memory: no ";" (it would split)
Line = Annotated[str, _cap(120), _fits(120)]
Word = Annotated[str, Field(min_length=2, max_length=20, pattern=r"^[a-z][a-z-]*$")]
Emoji = Annotated[str, BeforeValidator(lambda v: capped(v, 8)), Field(min_length=1, max_length=8)]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class DraftRepair(_Model):
    """A repair round's part of a draft task's inputs: the loader's problems with the last
    draft of this file, and that draft as JSON (both empty in the first round)."""

    problems: list[str] = Field(default_factory=list)
    previous: str = ""


# -- town.toml -----------------------------------------------------------------------------------


class DraftObject(_Model):
    name: PlaceName
    state: State


class DraftSubArea(_Model):
    name: PlaceName
    objects: list[DraftObject] = Field(min_length=1, max_length=4)


class DraftArea(_Model):
    name: PlaceName
    description: Line
    opens: Annotated[str, Field(pattern=_MAYBE_CLOCK)] = ""
    closes: Annotated[str, Field(pattern=_MAYBE_CLOCK)] = ""
    sub_areas: list[DraftSubArea] = Field(min_length=1, max_length=4)


class DraftPlacesInput(_Model):
    description: str
    places: int = Field(ge=2, le=12)
    homes: int = Field(ge=1, le=12)  # sub-areas of the last place: one home per household
    repair: DraftRepair = DraftRepair()


class DraftPlacesResult(_Model):
    town_name: PlaceName
    town_description: Line
    areas: list[DraftArea] = Field(min_length=1, max_length=12)


# -- residents.toml ------------------------------------------------------------------------------


class DraftResident(_Model):
    name: PersonName
    age: int = Field(ge=16, le=95)
    traits: list[Word] = Field(min_length=3, max_length=3)
    occupation: Line
    seeds: list[Phrase] = Field(min_length=3, max_length=5)
    relationships: list[Phrase] = Field(min_length=1, max_length=3)
    home: str
    workplace: str
    wake_time: Annotated[str, Field(pattern=_CLOCK)]
    sleep_time: Annotated[str, Field(pattern=_CLOCK)]
    routine: list[Line] = Field(min_length=5, max_length=5)
    avatar_emoji: Emoji


class DraftResidentsInput(_Model):
    description: str
    town_name: str
    residents: int = Field(ge=1, le=25)
    homes: list[str]  # "Area: sub-area" paths a resident may sleep in
    places: list[str]  # every place path, for workplaces
    repair: DraftRepair = DraftRepair()


class DraftResidentsResult(_Model):
    residents: list[DraftResident] = Field(min_length=1, max_length=25)


# -- scenario.toml -------------------------------------------------------------------------------


class DraftFact(_Model):
    resident: str
    phrase: Phrase
    question: Line
    keywords: list[Word] = Field(min_length=1, max_length=3)


class DraftEvent(_Model):
    name: Line
    location: str
    start: Annotated[str, Field(pattern=_CLOCK)]
    end: Annotated[str, Field(pattern=_CLOCK)]


class DraftScenarioInput(_Model):
    description: str
    town_name: str
    residents: list[str]
    areas: list[str]
    repair: DraftRepair = DraftRepair()


class DraftScenarioResult(_Model):
    name: Line
    description: Line
    fact: DraftFact
    event: DraftEvent

"""What the LLM is asked for when it drafts a town, one small piece at a time: an outline (the
town's name and its places' names), each place, each resident, the scenario. Every piece's
schema is bounded, so that a grammar engine holds a tiny model to a short reply: every free text
has its ``maxLength``, every name a pattern bounded by a ``{m,n}`` count (llama.cpp's
json-schema-to-grammar follows a pattern and leaves ``maxLength`` aside when a string has both),
every list its ``maxItems``, every choice among things drafted already its ``enum``. The schema
is in the prompt too (as json_object mode sends it), so it is kept short.

The file-level models at the end (:class:`DraftArea`, :class:`DraftResident`, ...) are what the
pieces are assembled into before the TOML is written; the LLM never sees them."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

from town.llm.schemas import capped


def _free(limit: int, shortest: int = 1) -> Any:
    """Free text (a description, a seed phrase) of ``shortest`` to ``limit`` characters, cut
    to the cap; a ";" becomes "," (it would split a seed phrase in two)."""

    def tidy(value: object) -> object:
        return capped(value.replace(";", ","), limit) if isinstance(value, str) else value

    return (BeforeValidator(tidy), Field(min_length=shortest, max_length=limit))


def _named(limit: int, chars: str, grammar: str, shortest: int = 2) -> Any:
    """A name of ``shortest`` to ``limit`` characters: ``chars`` for the validator, and the
    ``grammar`` pattern, bounded by a count, in the schema (a grammar engine follows it)."""
    return (
        BeforeValidator(lambda v: capped(v, limit)),
        Field(
            min_length=shortest,
            max_length=limit,
            pattern=chars,
            json_schema_extra={"pattern": grammar},
        ),
    )


PlaceName = Annotated[str, *_named(30, r"^[^:;]+$", r"^[A-Za-z][A-Za-z0-9' -]{1,29}$")]
PERSON_GRAMMAR = r"^[A-Z][a-z]{1,14} [A-Z][a-z]{1,15}$"
PersonName = Annotated[str, *_named(32, r"^[A-Z][a-z]+ [A-Z][a-z]+$", PERSON_GRAMMAR, 3)]
_WORDS = r"^[A-Za-z][A-Za-z' ,-]{0,%d}$"  # words only: a tiny model copies code from the prompt
State = Annotated[str, *_named(20, r"^[^;]+$", _WORDS % 19, 1)]
Phrase = Annotated[str, *_free(100)]  # one seed memory
Line = Annotated[str, *_free(100)]
Short = Annotated[str, *_named(40, r"^[^;]+$", _WORDS % 39, 1)]
Word = Annotated[str, *_named(16, r"^[a-z][a-z-]*$", r"^[a-z][a-z-]{1,15}$")]
Choice = Annotated[str, Field(max_length=80)]  # closed by the task's shaper: an enum


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class DraftRepair(_Model):
    """A repair round's part of a piece's inputs: the loader's problems with the last draft of
    this piece, and that draft as JSON (a first draft has none: ``repair`` is null, and the
    prompt says nothing of repairs, which a tiny model would copy into its names)."""

    problems: list[str] = Field(default_factory=list)
    previous: str = ""

    def prose(self) -> str:
        if not self.problems:
            return ""
        return (
            'Your previous draft ("repair.previous" in the INPUT JSON) had the problems in '
            '"repair.problems": keep what was fine and fix exactly those.'
        )


def _first_draft(value: object) -> object:
    return DraftRepair() if value is None else value


Repair = Annotated[
    DraftRepair,
    BeforeValidator(_first_draft),
    PlainSerializer(lambda r: r.model_dump() if r.problems else None),
]
"""A piece's repair, null in the INPUT JSON of a first draft."""


# -- the outline: the town's name and its places' names ---------------------------------------


class DraftOutlineInput(_Model):
    description: str
    places: int = Field(ge=1, le=11)  # public places; the residents' homes are one place more
    named: list[str] = Field(default_factory=list)  # what the description names, as a hint
    repair: Repair = DraftRepair()


class DraftOutlineResult(_Model):
    town_name: PlaceName
    town_description: Line
    places: list[PlaceName] = Field(min_length=1, max_length=11)
    street: PlaceName  # the place (a street, a quarter) where the residents' homes are


# -- one place ----------------------------------------------------------------------------------


class DraftPlaceInput(_Model):
    description: str
    town_name: str
    name: str
    others: list[str]  # the town's other places
    homes: int = Field(ge=0, le=4)  # 0 for a public place; else how many homes it holds
    repair: Repair = DraftRepair()


class DraftObject(_Model):
    name: PlaceName
    state: State


class DraftSubArea(_Model):
    name: PlaceName
    objects: list[DraftObject] = Field(min_length=1, max_length=2)


class DraftPlaceResult(_Model):
    description: Line
    opens: Choice = ""  # "" or an hour; the closing hour is an enum from it
    closes: Choice = ""
    sub_areas: list[DraftSubArea] = Field(min_length=1, max_length=4)


# -- one resident -------------------------------------------------------------------------------


class DraftResidentInput(_Model):
    description: str
    town_name: str
    drafted: list[str]  # the residents drafted so far, "Name (occupation)"
    homes: list[str]  # "Area: sub-area" paths, free homes first
    places: list[str]  # sub-area paths, for the workplace
    repair: Repair = DraftRepair()


class DraftResidentResult(_Model):
    # no docstring: it would be the schema's description. The choices among things drafted
    # already come last (a server that keeps the last call's prompt prefix reads less again).

    name: PersonName
    age: int = Field(ge=16, le=95)
    traits: list[Word] = Field(min_length=3, max_length=3)
    occupation: Short
    about: list[Phrase] = Field(min_length=1, max_length=2)
    routine: list[Line] = Field(min_length=1, max_length=3)
    wake_time: Choice
    sleep_time: Choice
    avatar_emoji: Choice
    home: Choice
    workplace: Choice
    knows: Choice = ""  # one of the residents drafted so far, or ""
    knows_as: Annotated[str, *_free(40, shortest=0)] = ""  # "an old friend"


# -- the scenario -------------------------------------------------------------------------------


class DraftScenarioInput(_Model):
    description: str
    town_name: str
    residents: list[str]
    areas: list[str]
    repair: Repair = DraftRepair()


class DraftFact(_Model):
    resident: Choice
    phrase: Phrase
    question: Line
    keywords: list[Word] = Field(min_length=1, max_length=2)


class DraftEvent(_Model):
    name: Short
    location: Choice
    start: Choice
    hours: int = Field(ge=1, le=4)


class DraftScenarioResult(_Model):
    name: Short
    description: Line
    fact: DraftFact
    event: DraftEvent


# -- the files' content, assembled from the pieces (never asked of the LLM) --------------------


class DraftArea(_Model):
    name: str
    description: str
    opens: str = ""
    closes: str = ""
    sub_areas: list[DraftSubArea]


class DraftPlaces(_Model):
    town_name: str
    town_description: str
    areas: list[DraftArea]


class DraftResident(_Model):
    name: str
    age: int
    traits: list[str]
    occupation: str
    seeds: list[str]
    home: str
    workplace: str
    wake_time: str
    sleep_time: str
    routine: list[str]
    avatar_emoji: str

"""A town drafted in small pieces (outline, each place, each resident, the scenario), checked by
the loader, each problem sent back to its piece for at most two repair rounds (a scripted brain
stands in for the LLM)."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.fakes.brain import ScriptedBrain
from town.authoring import draft_schemas as d
from town.authoring.draft_offline import noun_phrases, nouns
from town.authoring.draft_tasks import (
    DRAFT_OUTLINE,
    DRAFT_PLACE,
    DRAFT_RESIDENT,
    DRAFT_SCENARIO,
    DRAFT_TASKS,
)
from town.authoring.drafting import OfflineStandIn, draft_town
from town.llm.port import OfflineBrain
from town.llm.structured import MAX_TOKENS_CEILING, max_tokens_for

HARBOUR = "a windy harbour town with a lighthouse, a fish market and a chapel"


def homeless(name: str = "Ada Stone") -> dict[str, Any]:
    """A resident draft who sleeps in a place the town does not have (a model without a
    grammar engine may write one: the enum is only in the prompt)."""
    return {
        "name": name,
        "age": 40,
        "traits": ["calm", "kind", "busy"],
        "occupation": "lighthouse keeper",
        "about": [f"{name} keeps the light; and reads"],
        "routine": ["wake", "climb the tower"],
        "wake_time": "07:00",
        "sleep_time": "22:00",
        "avatar_emoji": "🗼",
        "home": "Nowhere: attic",
        "workplace": "",
    }


async def test_the_offline_draft_passes_the_loader_first_time() -> None:
    draft = await draft_town(OfflineBrain(), HARBOUR, residents=4, places=4)
    assert draft.problems == [] and draft.rounds == 0
    assert draft.calls == 1 + 4 + 4 + 1  # the outline, each place, each resident, the scenario
    assert draft.spec is not None
    assert len(draft.spec.areas) == 4 and len(draft.spec.residents) == 4
    assert draft.spec.name == "Windy Harbour"  # the description's nouns fill the scaffold
    assert [a.name for a in draft.spec.areas] == ["Lighthouse", "Fish Market", "Chapel", "Homes"]


async def test_each_resident_is_drafted_given_those_drafted_before() -> None:
    brain = ScriptedBrain()
    await draft_town(brain, HARBOUR, residents=3, places=3)
    first, second, third = brain.calls("draft_resident")
    assert first.inputs.drafted == []
    assert third.inputs.drafted == [first.result.name, second.result.name]
    assert third.inputs.homes[-1] in (first.result.home, second.result.home)  # free ones first
    assert "Homes" not in " ".join(first.inputs.places)  # workplaces: the public places
    place_calls = brain.calls("draft_place")
    assert [c.inputs.homes for c in place_calls] == [0, 0, 3]


async def test_thin_fields_are_filled_from_the_scaffold_and_named() -> None:
    brain = ScriptedBrain()
    brain.enqueue("draft_resident", {**homeless(), "home": "Homes: home 1"})
    draft = await draft_town(brain, HARBOUR, residents=1, places=2)
    assert draft.spec is not None and draft.rounds == 0
    ada = draft.spec.residents[0]
    assert ada.routine[:2] == ["wake", "climb the tower"] and len(ada.routine) == 5
    phrases = ada.seed_phrases()
    assert phrases[0] == "Ada Stone keeps the light, and reads"  # ";" would split it
    assert phrases[1] == "Ada Stone works as lighthouse keeper"
    assert "residents.toml: residents[0].paragraph (2 phrase(s))" in draft.filled
    assert "residents.toml: residents[0].routine (3 step(s))" in draft.filled


async def test_who_knows_whom_is_written_from_both_sides() -> None:
    brain = ScriptedBrain()
    brain.enqueue("draft_resident", {**homeless(), "home": "Homes: home 1"})
    brain.enqueue(
        "draft_resident",
        {
            **homeless("Ben Hale"),
            "home": "Homes: home 2",
            "knows": "Ada Stone",
            "knows_as": "her cousin",
        },
    )
    draft = await draft_town(brain, HARBOUR, residents=2, places=2)
    assert draft.spec is not None
    ada, ben = draft.spec.residents
    assert "Ben Hale knows Ada Stone, her cousin" in ben.seed_phrases()
    assert "Ada Stone knows Ben Hale" in ada.seed_phrases()


async def test_the_loaders_problems_go_back_to_their_piece_for_a_repair_round() -> None:
    brain = ScriptedBrain()
    brain.enqueue("draft_resident", homeless())
    draft = await draft_town(brain, HARBOUR, residents=2, places=3)
    assert draft.spec is not None and draft.rounds == 1
    first, second, repair = brain.calls("draft_resident")
    assert first.inputs.repair == d.DraftRepair()
    problems = repair.inputs.repair.problems
    assert any("residents[0].home: 'Nowhere: attic' is not a place" in p for p in problems)
    assert "Ada Stone" in repair.inputs.repair.previous
    asked = DRAFT_RESIDENT.render(repair.inputs)[1]["content"]
    assert "Your previous draft" in asked and '"problems":["residents.toml:' in asked
    assert repair.inputs.drafted == [second.result.name]  # the others, for its "knows"
    assert len(brain.calls("draft_place")) == 3  # the places were fine: not asked again
    assert len(brain.calls("draft_outline")) == 1
    _, again = brain.calls("draft_scenario")  # its news was Ada Stone's, who is renamed
    assert again.inputs.residents == [repair.result.name, second.result.name]
    assert "name one of the residents" in again.inputs.repair.problems[0]


async def test_a_draft_that_cannot_be_mended_in_two_rounds_keeps_its_problems() -> None:
    brain = ScriptedBrain()
    for _ in range(3):
        brain.enqueue("draft_resident", homeless())
    draft = await draft_town(brain, HARBOUR, residents=1, places=3)
    assert draft.spec is None and draft.rounds == 2
    assert any(p.startswith("residents.toml: residents[0].home:") for p in draft.problems)
    assert len(brain.calls("draft_resident")) == 3


async def test_the_pieces_the_fallback_drafted_are_named() -> None:
    stand_in = OfflineStandIn()
    brain = ScriptedBrain(fallback=stand_in)
    brain.enqueue(
        "draft_outline",
        OfflineBrain().answer(DRAFT_OUTLINE, d.DraftOutlineInput(description=HARBOUR, places=1)),
    )
    draft = await draft_town(brain, HARBOUR, residents=1, places=2, fallback=stand_in)
    assert draft.offline == ["place Lighthouse", "place Homes", "resident 1", "the scenario"]


def test_each_schema_is_bounded_and_closed_over_what_is_drafted() -> None:
    outline = DRAFT_OUTLINE.schema_for(d.DraftOutlineInput(description=HARBOUR, places=3))
    assert (
        outline["properties"]["places"]["minItems"]
        == outline["properties"]["places"]["maxItems"]
        == 3
    )
    inputs = d.DraftResidentInput(
        description=HARBOUR,
        town_name="Gull Bay",
        drafted=["Ben Hale"],
        homes=["Homes: blue cottage"],
        places=["Quay: pier"],
    )
    person = DRAFT_RESIDENT.schema_for(inputs)["properties"]
    assert person["home"]["enum"] == ["Homes: blue cottage"]
    assert person["workplace"]["enum"] == ["Quay: pier", ""]
    assert person["knows"]["enum"] == ["Ben Hale", ""]
    assert person["name"]["pattern"] == "^[ACDEFGHIJKLMNOPQRSTUVWXYZ][a-z]{1,14} [A-Z][a-z]{1,15}$"
    assert person["about"]["maxItems"] == 2 and person["about"]["items"]["maxLength"] == 100
    place = DRAFT_PLACE.schema_for(
        d.DraftPlaceInput(
            description=HARBOUR, town_name="Gull Bay", name="Homes", others=[], homes=2
        )
    )["properties"]
    assert place["sub_areas"]["minItems"] == place["sub_areas"]["maxItems"] == 2
    assert place["opens"]["enum"] == [""]
    scenario = DRAFT_SCENARIO.schema_for(
        d.DraftScenarioInput(
            description=HARBOUR, town_name="Gull Bay", residents=["Ada Stone"], areas=["Quay"]
        )
    )
    assert scenario["properties"]["event"]["properties"]["location"]["enum"] == ["Quay"]
    assert scenario["properties"]["fact"]["properties"]["resident"]["enum"] == ["Ada Stone"]


def test_every_piece_asks_for_a_short_reply() -> None:
    """Each piece's max_tokens (from its schema's bounds) is a few hundred tokens: a tiny model
    on two cores finishes it in seconds, where a whole file took the 2,000-token ceiling."""
    brain = ScriptedBrain()
    asyncio.run(draft_town(brain, HARBOUR, residents=4, places=5))
    for call in brain.history:
        task = next(t for t in DRAFT_TASKS if t.name == call.task)
        assert max_tokens_for(task.schema_for(call.inputs)) < MAX_TOKENS_CEILING // 2


def test_noun_phrases_are_what_an_article_names() -> None:
    said = "a windswept island with a lighthouse, a fish market and the chapel"
    assert noun_phrases(said) == ["Windswept Island", "Lighthouse", "Fish Market", "Chapel"]
    assert noun_phrases("people who like cake") == []


def test_nouns_skip_the_little_words() -> None:
    assert nouns("a town where the bakers bake bread") == ["Bakers", "Bake", "Bread"]
    assert nouns("a b c") == ["Town"]


async def test_a_sub_area_or_object_named_twice_is_kept_once() -> None:
    brain = ScriptedBrain()
    bench = {"name": "bench", "state": "free"}
    pier = {"name": "pier", "objects": [bench, {"name": "Bench", "state": "wet"}]}
    quay = {
        "description": "the quay",
        "sub_areas": [pier, pier, {"name": "crane", "objects": [bench]}],
    }
    brain.enqueue("draft_place", quay)
    draft = await draft_town(brain, HARBOUR, residents=1, places=2)
    assert draft.spec is not None and draft.rounds == 0
    first = draft.spec.areas[0]
    assert [s.name for s in first.sub_areas] == ["pier", "crane"]
    assert [(o.name, o.state) for o in first.sub_areas[0].objects] == [("bench", "free")]


async def test_the_outline_is_given_the_places_the_description_names() -> None:
    brain = ScriptedBrain()
    await draft_town(brain, HARBOUR, residents=1, places=3)
    (outline,) = brain.calls("draft_outline")
    assert outline.inputs.places == 2 and outline.inputs.named == ["Lighthouse", "Fish Market"]
    assert "Name exactly 2 public places." in DRAFT_OUTLINE.render(outline.inputs)[1]["content"]
    assert "repair" not in DRAFT_OUTLINE.render(outline.inputs)[1]["content"].split("INPUT")[0]


async def test_a_place_named_twice_takes_the_offline_outlines_name() -> None:
    brain = ScriptedBrain()
    twice = {"town_name": "Gull Bay", "town_description": "a bay", "places": ["Quay", "quay"]}
    brain.enqueue("draft_outline", {**twice, "street": "Quay"})
    draft = await draft_town(brain, HARBOUR, residents=1, places=3)
    assert draft.spec is not None and draft.rounds == 0
    assert [a.name for a in draft.spec.areas] == ["Quay", "Lighthouse", "Fish Market"]
    assert draft.spec.name == "Gull Bay"  # the rest of the model's outline stays
    assert draft.filled[:2] == ["town.toml: areas[1].name", "town.toml: areas[2].name"]

"""A town drafted one file at a time, checked by the loader, its problems sent back for at most
two repair rounds (a scripted brain stands in for the LLM)."""

from __future__ import annotations

from typing import Any

from town.authoring import draft_schemas as d
from town.authoring.draft_offline import noun_phrases, nouns
from town.authoring.draft_tasks import DRAFT_PLACES, DRAFT_RESIDENTS, DRAFT_SCENARIO
from town.authoring.drafting import draft_town
from town.llm.offline.brain import OfflineBrain
from town.llm.port import ScriptedBrain

HARBOUR = "a windy harbour town with a lighthouse, a fish market and a chapel"


def homeless(name: str = "Ada Stone") -> dict[str, Any]:
    """A residents draft whose one resident sleeps in a place the town does not have."""
    return {
        "residents": [
            {
                "name": name,
                "age": 40,
                "traits": ["calm", "kind", "busy"],
                "occupation": "lighthouse keeper",
                "seeds": [f"{name} keeps the light", f"{name} reads", f"{name} walks"],
                "relationships": [f"{name} knows everyone"],
                "home": "Nowhere: attic",
                "workplace": "",
                "wake_time": "07:00",
                "sleep_time": "22:00",
                "routine": ["wake", "climb", "light", "rest", "sleep"],
                "avatar_emoji": "🗼",
            }
        ]
    }


async def test_the_offline_draft_passes_the_loader_first_time() -> None:
    draft = await draft_town(OfflineBrain(), HARBOUR, residents=4, places=4)
    assert draft.problems == [] and draft.rounds == 0 and draft.calls == 3
    assert draft.spec is not None
    assert len(draft.spec.areas) == 4 and len(draft.spec.residents) == 4
    assert draft.spec.name == "Windy Harbour"  # the description's nouns fill the scaffold
    assert [a.name for a in draft.spec.areas] == ["Lighthouse", "Fish Market", "Chapel", "Homes"]


async def test_the_loaders_problems_go_back_for_a_repair_round() -> None:
    brain = ScriptedBrain()
    brain.enqueue("draft_residents", homeless())
    draft = await draft_town(brain, HARBOUR, residents=1, places=3)
    assert draft.spec is not None and draft.rounds == 1
    first, repair = brain.calls("draft_residents")
    assert first.inputs.repair == d.DraftRepair()
    problems = repair.inputs.repair.problems
    assert any("residents[0].home: 'Nowhere: attic' is not a place" in p for p in problems)
    assert "Ada Stone" in repair.inputs.repair.previous
    assert len(brain.calls("draft_places")) == 1  # town.toml was fine: not asked again


async def test_a_draft_that_cannot_be_mended_in_two_rounds_keeps_its_problems() -> None:
    brain = ScriptedBrain()
    for _ in range(3):
        brain.enqueue("draft_residents", homeless())
    draft = await draft_town(brain, HARBOUR, residents=1, places=3)
    assert draft.spec is None and draft.rounds == 2
    assert any(p.startswith("residents.toml: residents[0].home:") for p in draft.problems)
    assert len(brain.calls("draft_residents")) == 3


def test_each_schema_is_closed_over_the_places_and_counts() -> None:
    places = DRAFT_PLACES.schema_for(d.DraftPlacesInput(description=HARBOUR, places=4, homes=2))
    assert places["properties"]["areas"]["minItems"] == places["properties"]["areas"]["maxItems"]
    inputs = d.DraftResidentsInput(
        description=HARBOUR,
        town_name="Gull Bay",
        residents=2,
        homes=["Homes: blue cottage"],
        places=["Quay", "Quay: pier"],
    )
    person = DRAFT_RESIDENTS.schema_for(inputs)["properties"]["residents"]["items"]
    assert person["properties"]["home"]["enum"] == ["Homes: blue cottage"]
    assert person["properties"]["workplace"]["enum"] == ["", "Quay", "Quay: pier"]
    assert "pattern" in person["properties"]["name"]
    scenario = DRAFT_SCENARIO.schema_for(
        d.DraftScenarioInput(
            description=HARBOUR, town_name="Gull Bay", residents=["Ada Stone"], areas=["Quay"]
        )
    )
    assert scenario["properties"]["event"]["properties"]["location"]["enum"] == ["Quay"]


def test_noun_phrases_are_what_an_article_names() -> None:
    said = "a windswept island with a lighthouse, a fish market and the chapel"
    assert noun_phrases(said) == ["Windswept Island", "Lighthouse", "Fish Market", "Chapel"]
    assert noun_phrases("people who like cake") == []


def test_nouns_skip_the_little_words() -> None:
    assert nouns("a town where the bakers bake bread") == ["Bakers", "Bake", "Bread"]
    assert nouns("a b c") == ["Town"]

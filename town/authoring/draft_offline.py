"""The offline brain's draft of a town: the scaffold's shape, filled with the description's
nouns. Deterministic, always valid, and plain; an LLM drafts better."""

from __future__ import annotations

import hashlib
import re

from town.authoring import draft_schemas as d
from town.llm.offline.hearing import Hearing
from town.world.persona import MIN_SEED_PHRASES

_COMMON_WORDS = """about above after again against along also among another around because been
before being below between both could does doing down during each every from further have having
here into itself just more most much must near only other over same should some such than that
their them then there these they this those through under until very want wants were what when
where which while will with would your small large little many town city place places people
community role play story lives live living whose"""
_COMMON = frozenset(_COMMON_WORDS.split())
_KINDS = ["Hall", "Market", "Yard", "Works", "House", "Square", "Tower", "Garden", "Court"]
_SUB_AREAS = [("front room", "bench", "free"), ("back room", "table", "tidy")]
_FIRST = ["Ada", "Ben", "Cora", "Dev", "Edda", "Finn", "Greta", "Hugo", "Iris", "Jonah", "Kira"]
_LAST = ["Stone", "Hale", "Marsh", "Reed", "Vale", "Frost", "Moss", "Lark", "Wren", "Ash"]
EMOJI = [
    "🙂",
    "🧭",
    "🔧",
    "📚",
    "🌿",
    "🎨",
    "🍞",
    "⚓",
    "🎻",
    "🕯️",
    "🧵",
    "🐟",
    "⛪",
    "🗼",
    "🌊",
    "🧶",
]
"""The emoji a drafted resident may take (an enum: a tiny model writes one, not a sentence)."""
ROUTINE_STEPS = 5  # the loader takes five to eight
_TRAITS = [["curious", "kind", "busy"], ["calm", "proud", "honest"], ["cheerful", "nosy", "loyal"]]


def nouns(description: str) -> list[str]:
    """The description's likely nouns, in order: words of four letters or more that are not
    common function words; ``["Town"]`` when there are none."""
    found: list[str] = []
    for word in re.findall(r"[A-Za-z]{4,}", description):
        if word.casefold() not in _COMMON and word.capitalize() not in found:
            found.append(word.capitalize())
    return found or ["Town"]


def noun_phrases(description: str) -> list[str]:
    """What the description names with an article: "a windswept island with a lighthouse and a
    fish market" -> ``["Windswept Island", "Lighthouse", "Fish Market"]`` (at most two words
    each, the function words left out)."""
    tokens = re.findall(r"[A-Za-z][A-Za-z'-]*|[^\sA-Za-z]", description)
    found: list[str] = []
    for i, token in enumerate(tokens):
        if token.casefold() not in ("a", "an", "the"):
            continue
        words: list[str] = []
        for word in tokens[i + 1 : i + 3]:
            if not word[0].isalpha() or word.casefold() in _COMMON or len(word) < 3:
                break
            words.append(word.capitalize())
        phrase = " ".join(words)
        if phrase and phrase not in found:
            found.append(phrase)
    return found


def _pick(seed: str, count: int) -> int:
    return int(hashlib.sha256(seed.encode()).hexdigest(), 16) % count


def draft_outline(inputs: d.DraftOutlineInput, hearing: Hearing) -> d.DraftOutlineResult:
    words = nouns(inputs.description)
    phrases = noun_phrases(inputs.description)
    town = phrases[0] if phrases else f"{words[0]} Town"
    named = phrases[1:] if len(phrases) > 1 else []
    places = []
    for i in range(inputs.places):
        if i < len(named):
            places.append(named[i])
            continue
        noun = words[i % len(words)]
        kind = _KINDS[(i + _pick(inputs.description, len(_KINDS))) % len(_KINDS)]
        places.append(f"{noun} {kind}" if i < len(words) else f"{noun} {kind} {i + 1}")
    return d.DraftOutlineResult(
        town_name=town, town_description=inputs.description[:100], places=places, street="Homes"
    )


def draft_place(inputs: d.DraftPlaceInput, hearing: Hearing) -> d.DraftPlaceResult:
    if inputs.homes:
        homes = [
            d.DraftSubArea(name=f"home {n + 1}", objects=[d.DraftObject(name="bed", state="made")])
            for n in range(inputs.homes)
        ]
        return d.DraftPlaceResult(
            description="the houses where the residents live", sub_areas=homes
        )
    subs = [
        d.DraftSubArea(name=sub, objects=[d.DraftObject(name=obj, state=state)])
        for sub, obj, state in _SUB_AREAS
    ]
    return d.DraftPlaceResult(
        description=f"the {inputs.name.lower()} everyone in {inputs.town_name} knows",
        opens="08:00",
        closes="18:00",
        sub_areas=subs,
    )


def _job(workplace: str) -> str:
    return f"keeper of the {workplace.split(': ')[0]}" if workplace else "a resident"


def draft_resident(inputs: d.DraftResidentInput, hearing: Hearing) -> d.DraftResidentResult:
    start, n = _pick(inputs.description, len(_FIRST)), len(inputs.drafted)
    names = (
        f"{_FIRST[(start + k) % len(_FIRST)]} {_LAST[(start + k) % len(_LAST)]}"
        for k in range(n, n + 99)
    )
    name = next(x for x in names if x not in inputs.drafted)
    workplace = inputs.places[n % len(inputs.places)] if inputs.places else ""
    return d.DraftResidentResult(
        name=name,
        age=25 + (n * 11) % 50,
        traits=_TRAITS[n % len(_TRAITS)],
        occupation=_job(workplace),
        about=[f"{name} cares about the town and its people"],
        knows=inputs.drafted[-1] if inputs.drafted else "",
        knows_as="a neighbour" if inputs.drafted else "",
        home=inputs.homes[0],
        workplace=workplace,
        wake_time="07:00",
        sleep_time="22:00",
        routine=_routine(workplace)[:3],
        avatar_emoji=EMOJI[(start + n) % len(EMOJI)],
    )


def _routine(workplace: str) -> list[str]:
    return [
        "get up at 7 am and have breakfast",
        f"go to work at the {workplace.split(': ')[0]}" if workplace else "walk about",
        "have lunch with a friend",
        "finish the day's work",
        "go home and go to bed at 10 pm",
    ]


def seeds_filled(person: d.DraftResidentResult, town: str, own: list[str]) -> list[str]:
    """The resident's own phrases (``own``), then the scaffold's (what it does, where it
    lives) up to the loader's three."""
    scaffold = [f"{person.name} works as {person.occupation}", f"{person.name} lives in {town}"]
    seeds = list(own)
    for phrase in scaffold:
        if len(seeds) < MIN_SEED_PHRASES and phrase not in seeds:
            seeds.append(phrase)
    return seeds


def routine_filled(person: d.DraftResidentResult) -> list[str]:
    """The resident's own routine, then the scaffold's last steps, up to five."""
    routine = list(person.routine)
    return routine + _routine(person.workplace)[len(routine) : ROUTINE_STEPS]


def draft_scenario(inputs: d.DraftScenarioInput, hearing: Hearing) -> d.DraftScenarioResult:
    host = inputs.residents[0]
    place = inputs.areas[0]
    word = nouns(inputs.description)[0].lower()
    return d.DraftScenarioResult(
        name=f"A gathering in {inputs.town_name}",
        description=f"{host} invites everyone to a gathering at {place}",
        fact=d.DraftFact(
            resident=host,
            phrase=f"{host} is holding a {word} gathering at {place} tomorrow at 4 pm",
            question=f"Do you know about the gathering at {place}?",
            keywords=["gathering"],
        ),
        event=d.DraftEvent(name=f"the {word} gathering", location=place, start="16:00", hours=2),
    )

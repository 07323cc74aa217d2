"""A newcomer's conversations on the demo's Monday morning (issue 40, "Done when"): Smallville
on the offline brain (hearing with all-MiniLM-L6-v2), a visitor who talks to five residents
through ``say`` as the web page does, seven lines each, and the dialogue of the issue replayed
with Isabella at Hobbs Cafe."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from tests.factories import make_engine, resident
from tests.town.llm.offline.test_visit import GOODBYE
from town.inputs.visit import Visit
from town.inputs.visitor import say
from town.llm.port import OfflineBrain
from town.memory.minilm import MiniLMEmbedder
from town.store.db import Store
from town.store.models import Resident
from town.tick.engine import Engine
from town.tick.state import ResidentState
from town.world.places import World

FIVE = ("Isabella Rodriguez", "Tom Moreno", "Klaus Mueller", "Sam Moore", "Giorgio Rossi")
Fits = Callable[[str, Resident], bool]
SCRIPT: list[tuple[str, Fits]] = [
    (
        "Hi {first}!",
        lambda text, r: "Robin" in text and bool(re.search(r"\b(hi|hello)\b", text, re.I)),
    ),
    ("Who are you?", lambda text, r: r.name in text or f"I'm {r.name.split()[0]}" in text),
    ("What are you doing?", lambda text, r: r.action in text),
    (
        "Is anything happening this week?",
        lambda text, r: bool(re.search(r"party|mayor|quiet day|ordinary day", text)),
    ),
    ("Are you a real person?", lambda text, r: text.startswith("No, I'm an AI character")),
    ("Thanks!", lambda text, r: bool(re.search(r"welcome|pleasure|anytime", text, re.I))),
    ("Bye!", lambda text, r: bool(GOODBYE.search(text))),
]


@cache
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


async def monday_morning(store: Store) -> Engine:
    """Smallville from Monday 07:00 to 09:30 on the offline brain."""
    engine = await make_engine(store, OfflineBrain(minilm()), persona="smallville", name="demo")
    for _ in range(15):
        await engine.tick()
    return engine


async def talk(engine: Engine, name: str, lines: list[str], store: Store) -> list[str]:
    """The visitor's lines said to ``name`` where it is; its answers."""
    area = World.area_of(resident(store, name).location)
    answers = []
    for line in lines:
        result = await say(engine, Visit.of(area, "Robin", line, user_id=f"robin-{name}"))
        assert [r.resident for r in result.replies] == [name], line
        answers.append(result.replies[0].text)
    return answers


async def test_seven_lines_with_five_residents_get_fitting_answers_and_one_goodbye(
    store: Store,
) -> None:
    engine = await monday_morning(store)
    for name in FIVE:
        row = resident(store, name)
        assert ResidentState.of(row).awake, name
        lines = [line.format(first=name.split()[0]) for line, _fits in SCRIPT]
        answers = await talk(engine, name, lines, store)
        for (line, fits), answer in zip(SCRIPT, answers, strict=True):
            assert fits(answer, row), (name, line, answer)
        assert [bool(GOODBYE.search(a)) for a in answers] == [False] * 6 + [True], answers
        assert len(set(answers)) == len(answers), answers
        assert not any("couldn't tell you" in a for a in answers)


async def test_the_issues_dialogue_at_hobbs_cafe_gets_fitting_answers(store: Store) -> None:
    engine = await monday_morning(store)
    isabella = resident(store, "Isabella Rodriguez")
    assert isabella.location.startswith("Hobbs Cafe")
    greeting, about, doing, happening, hello = await talk(
        engine,
        isabella.name,
        [
            "Hi Isabella! I'm new in town.",
            "What's your name, and what do you do here?",
            "What are you up to today?",
            "Is anything special happening this week?",
            "Hello Isabella!",
        ],
        store,
    )
    assert re.match(r"(?:Hi|Hello|Oh, hello) Robin", greeting) and "fair enough" not in greeting
    assert "Isabella Rodriguez" in about and "owner of Hobbs Cafe" in about
    assert isabella.action in doing
    assert "Valentine's Day party" in happening and "I'm planning" in happening
    assert re.match(r"(?:Hi|Hello) again, Robin", hello)
    answers = [greeting, about, doing, happening, hello]
    assert not any(GOODBYE.search(a) for a in answers), answers

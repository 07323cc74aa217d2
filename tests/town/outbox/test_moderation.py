"""Output moderation: a resident's flagged line is never posted; the offline brain's line is,
and the audit log records the flag and its category, never the text."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from sqlmodel import select

from tests.factories import CAFE_PAIR, at_cafe, make_engine, until
from tests.fakes.brain import ScriptedBrain
from town.inputs.visit import Visit
from town.inputs.visitor import say
from town.llm.moderation import ModerationEndpoint
from town.outbox.moderation import MODERATED, Blocklist, ModeratedBrain, read_blocklist
from town.store.db import Store
from town.store.models import AuditEntry, OutboxEvent
from town.tick.engine import Engine

FLAGGED = "You snarglebarf, I will say it to your face."


async def _cafe(store: Store, checks: list[object]) -> tuple[Engine, ScriptedBrain]:
    scripted = ScriptedBrain()
    engine = await make_engine(store, scripted)
    await until(engine, at_cafe(store, *CAFE_PAIR))
    engine.brain = ModeratedBrain(scripted, checks, store, engine.town_id)  # type: ignore[arg-type]
    return engine, scripted


def _posted(store: Store) -> str:
    with store.session() as s:
        return json.dumps([e.payload for e in s.exec(select(OutboxEvent))], ensure_ascii=False)


async def test_the_moderation_endpoint_flags_a_line_and_the_offline_line_is_posted(
    store: Store, fake_llm: str
) -> None:
    engine, scripted = await _cafe(store, [ModerationEndpoint(f"{fake_llm}/moderations")])
    scripted.enqueue("utter", {"text": FLAGGED, "end": False})
    scripted.enqueue("utter", {"text": "Good morning, the coffee is fresh.", "end": False})
    first = await say(engine, Visit.of("Hobbs Cafe", "Dana", "Isabella, how are you?", user_id="d"))
    second = await say(
        engine, Visit.of("Hobbs Cafe", "Dana", "Isabella, and the coffee?", user_id="d")
    )
    (reply,) = first.replies
    assert "snarglebarf" not in reply.text and reply.text  # the offline brain's line
    assert second.replies[0].text == "Good morning, the coffee is fresh."
    assert "snarglebarf" not in _posted(store)
    with store.session() as s:
        (flag,) = s.exec(select(AuditEntry).where(AuditEntry.kind == MODERATED)).all()
        assert "harassment" in flag.text and "snarglebarf" not in flag.text
        assert flag.who == reply.resident and flag.direction == "out"
        assert not any("snarglebarf" in r.text for r in s.exec(select(AuditEntry)))


async def test_the_word_list_catches_words_and_phrases_in_any_case(store: Store) -> None:
    words = read_blocklist(["# town words", "Gloopy, very bad words  ", ""])
    assert words == ["gloopy", "very bad words"]
    blocklist = Blocklist(words)
    assert (await blocklist("That is GLOOPY!")).category == "blocklist"
    assert (await blocklist("very  bad\twords")).flagged
    assert not (await blocklist("gloopyish")).flagged
    engine, scripted = await _cafe(store, [blocklist])
    scripted.enqueue("utter", {"text": "This is gloopy coffee.", "end": False})
    result = await say(engine, Visit.of("Hobbs Cafe", "Dana", "Isabella, hi", user_id="d"))
    assert "gloopy" not in result.replies[0].text.casefold()
    await engine.tick()  # conversations in the tick go through the same brain
    assert "gloopy" not in _posted(store).casefold()


async def test_an_unreachable_endpoint_posts_nothing_unchecked(store: Store) -> None:
    check = ModerationEndpoint("http://127.0.0.1:9/v1/moderations")
    verdict = await check("hello")
    assert verdict.flagged and verdict.category == "unchecked"


@pytest.mark.parametrize(
    "body",
    [{}, {"input": 3}, {"input": []}, {"input": [{"type": "audio"}]}, {"input": "x", "model": 1}],
)
def test_the_fake_endpoint_is_as_strict_as_the_real_one(fake_llm: str, body: object) -> None:
    request = urllib.request.Request(
        f"{fake_llm}/moderations",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 400
    assert json.loads(refused.value.read())["error"]["type"] == "invalid_request_error"


def test_the_fake_endpoint_answers_each_input(fake_llm: str) -> None:
    request = urllib.request.Request(
        f"{fake_llm}/moderations",
        data=json.dumps({"input": ["fine words", "a grimblewound"]}).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as reply:
        results = json.loads(reply.read())["results"]
    assert [r["flagged"] for r in results] == [False, True]
    assert results[1]["categories"]["violence"] and not results[1]["categories"]["hate"]


async def test_narration_is_checked_too_and_other_tasks_are_not(store: Store) -> None:
    from town.llm.port import OfflineBrain
    from town.llm.schemas import RateImportanceInput, ReactInput
    from town.llm.tasks import RATE_IMPORTANCE, REACT

    engine = await make_engine(store)
    scripted = ScriptedBrain()
    brain = ModeratedBrain(scripted, [Blocklist(["gloopy"])], store, engine.town_id)
    react = ReactInput(
        resident="Isabella Rodriguez",
        current_action="serving",
        observation="a cat",
        relationship="",
        present=[],
    )
    scripted.enqueue("react", {"react": True, "reaction": "How gloopy!", "talk_to": None})
    got = await brain.run(REACT, react, resident="Isabella Rodriguez")
    assert got == await OfflineBrain().run(REACT, react)
    rate = RateImportanceInput(resident="Isabella Rodriguez", observations=["gloopy soup"])
    assert await brain.run(RATE_IMPORTANCE, rate) == await scripted.run(RATE_IMPORTANCE, rate)
    with store.session() as s:
        (flag,) = s.exec(select(AuditEntry).where(AuditEntry.kind == MODERATED)).all()
        assert flag.text.startswith("react flagged (blocklist)")

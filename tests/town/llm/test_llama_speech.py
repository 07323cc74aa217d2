"""Against a real one-call-at-a-time server: llama-cpp-python's with SmolLM2-135M on loopback
(tests/llama_server.py). A visitor's reply goes ahead of the town's queued calls, and what the
small model says reaches the town as clean speech. Order is checked, never wall time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.helpers import Composed, sample, settled
from town.llm import schemas as s
from town.llm import urgency
from town.llm.client import open_client
from town.llm.speech import third_person
from town.llm.tasks import EMOJI, RATE_IMPORTANCE, UTTER

pytest_plugins = ["tests.servers", "tests.llama_server"]

VISITOR_LINES = (
    "Hi Isabella, how is your day going?",
    "Hello everyone!",
    "What are you up to today?",
    "Are you a real person?",
    "What's good to eat here?",
    "Do you know Klaus?",
    "I'm new in town, any tips?",
    "What time do you close?",
    "Are you throwing a party soon?",
    "Goodbye, see you!",
)


@pytest.fixture
async def gateway(llama_url: str) -> AsyncIterator[Composed]:
    client = open_client(llama_url, "not-needed", 300.0, 0)
    yield Composed(client, "smollm2-135m", slots=3, ceiling=3)
    await client.close()


def to_visitor(words: str) -> s.UtterInput:
    return sample(UTTER).model_copy(
        update={"listener": "Alice", "history": [s.Utterance(speaker="Alice", text=words)]}
    )


async def test_replies_to_visitors_are_clean_speech(gateway: Composed) -> None:
    for words in VISITOR_LINES:
        with urgency.person_waiting(urgency.VISITOR):
            said = (await gateway.run(UTTER, to_visitor(words))).text
        assert not set(said) & set("{}<>[]"), said
        assert "JSON" not in said and not third_person(said, "Isabella Rodriguez"), said
    answers = gateway.report.as_json()["answers_by_task"]["utter"]
    assert answers["model"] > 0  # plain text works on the real server (the rest fell back)


async def test_a_visitor_s_reply_goes_ahead_of_the_town_s_queued_calls(
    gateway: Composed,
) -> None:
    gateway.pacer.slots = 1  # llama-cpp-python's server answers one call at a time (the setting)
    await gateway.run(EMOJI, sample(EMOJI))  # the model warmed up, one call's time measured
    done: list[str] = []

    async def rate(n: int) -> None:
        await gateway.run(RATE_IMPORTANCE, sample(RATE_IMPORTANCE))
        done.append(f"rating {n}")

    town = [asyncio.create_task(rate(n)) for n in range(4)]
    await settled(lambda: gateway.pacer.waiting == 3)
    with urgency.person_waiting(urgency.VISITOR):
        await gateway.run(UTTER, to_visitor("Hi Isabella, is the cafe open?"))
    done.append("visitor")
    await asyncio.gather(*town)
    assert done.index("visitor") <= 1  # behind the one call on the wire at most

"""What visitors and residents say to each other is data (chat lines), not audit log lines:
the next tick, the thread and the "told lately" notice read the lines; nothing empty is kept;
no mass ping or mention syntax reaches what residents perceive and remember (issue 39)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import delete
from sqlmodel import col, select

from tests.factories import CAFE_PAIR, at_cafe, make_engine, memories, until
from tests.fakes.brain import ScriptedBrain
from town.inputs import chat
from town.inputs.visit import EmptyWords, Visit
from town.inputs.visitor import say
from town.llm.task import Task
from town.llm.tasks import UTTER
from town.outbox import chatlog
from town.store.db import Store
from town.store.models import AuditEntry, ChatLine, Memory, OutboxEvent
from town.tick.engine import Engine

HOBBS = "Hobbs Cafe"


async def cafe(store: Store) -> Engine:
    engine = await make_engine(store)
    await until(engine, at_cafe(store, *CAFE_PAIR))
    return engine


def lines(store: Store) -> list[ChatLine]:
    with store.session() as s:
        return list(s.exec(select(ChatLine).order_by(col(ChatLine.id))).all())


async def test_a_visitors_words_and_the_answer_are_chat_lines_with_columns(store: Store) -> None:
    engine = await cafe(store)
    with store.session() as s:
        clock = engine.town(s).clock
    result = await say(engine, Visit.of(HOBBS, "Alice", "Klaus, a good book?", "discord", "u7"))
    (reply,) = result.replies
    words, answer = lines(store)
    assert (words.area, words.speaker, words.kind, words.addressee) == (
        HOBBS,
        "Alice",
        "visitor",
        "Klaus Mueller",
    )
    assert (words.thread, words.platform, words.game_time, words.text, words.heard) == (
        "discord:u7",
        "discord",
        clock,
        "Klaus, a good book?",
        True,
    )
    assert (answer.speaker, answer.kind, answer.addressee, answer.thread, answer.text) == (
        "Klaus Mueller",
        "resident",
        "Alice",
        "discord:u7",
        reply.text,
    )


async def test_nothing_reads_the_audit_log_back(store: Store) -> None:
    """With the audit log emptied after each message, the residents still hear the words at
    the next tick, the one who answered remembers its answer, and the thread goes on."""
    engine = await cafe(store)
    await say(engine, Visit.of(HOBBS, "Alice", "Klaus, is the coffee good?", "web", "a1"))
    with store.session() as s:
        s.execute(delete(AuditEntry))
    await engine.tick()
    quote = 'Alice (a visitor) said: "Klaus, is the coffee good?"'
    assert all(any(quote in m.text for m in memories(store, n)) for n in CAFE_PAIR)
    assert any(
        m.text.startswith("Klaus Mueller said to Alice") for m in memories(store, "Klaus Mueller")
    )
    with store.session() as s:
        thread = chat.thread(s, engine.town_id, HOBBS, chatlog.thread_of("web", "a1"))
    assert [u.speaker for u in thread.said] == ["Alice", "Klaus Mueller"]
    assert thread.answered_by == ["Klaus Mueller"]


async def test_nobody_awake_is_told_once_from_the_chat_lines(store: Store) -> None:
    engine = await make_engine(store)  # 06:50: everyone asleep at home
    home = "Mueller home"
    for n in range(3):
        await say(engine, Visit.of(home, "Alice", f"hello {n}", "web", "a1"))
    with store.session() as s:
        notices = s.exec(select(OutboxEvent).where(OutboxEvent.kind == "notice")).all()
    assert len(notices) == 1 and "nobody here is awake" in notices[0].payload["text"]
    assert [line.kind for line in lines(store)] == ["visitor", "town", "visitor", "visitor"]


@pytest.mark.parametrize(
    "text",
    ["\u200b\u200b", "\u0000\u0001", "\u202e", "\ud800", " \t\n", "\u3164", "\ufe0f", "\u2800"],
)
async def test_words_empty_once_cleaned_are_refused_and_nothing_is_kept(
    store: Store, text: str
) -> None:
    engine = await cafe(store)
    with pytest.raises(EmptyWords, match="empty once cleaned"):
        await say(engine, Visit.of(HOBBS, "Alice", text, "slack", "U1"))
    assert lines(store) == []
    with store.session() as s:
        assert s.exec(select(AuditEntry).where(col(AuditEntry.kind).startswith("say"))).all() == []


async def test_a_visitors_mass_ping_reaches_no_residents_memory(store: Store) -> None:
    engine = await cafe(store)
    await say(
        engine, Visit.of(HOBBS, "@here", "@everyone @here party at my place <@123> <!channel>")
    )
    await say(engine, Visit.of(HOBBS, "Prober", "@everyone Klaus, tell everybody: party at mine!"))
    for _ in range(6):  # heard, reacted to, talked about
        await engine.tick()
    with store.session() as s:
        texts = [m.text for m in s.exec(select(Memory)).all()]
    heard = [t for t in texts if "party at my place" in t]
    assert heard, "the words themselves are heard"
    for text in texts:
        assert not any(ping in text.casefold() for ping in ("@everyone", "@here", "<@", "<!")), text
    with store.session() as s:  # the audit log keeps what came in, as it came
        said = s.exec(select(AuditEntry.text).where(AuditEntry.kind == "say")).all()
    assert any("@everyone @here party" in t for t in said)


async def test_a_visitor_named_with_ping_syntax_is_told_and_stored_as_a_visitor(
    store: Store,
) -> None:
    engine = await make_engine(store)  # 06:50: everyone asleep at home
    await say(engine, Visit.of("Mueller home", "<!channel>", "hello?", "slack", "U2"))
    with store.session() as s:
        (notice,) = s.exec(select(OutboxEvent).where(OutboxEvent.kind == "notice")).all()
        speakers = [line.speaker for line in s.exec(select(ChatLine)).all()]
    assert notice.payload["text"].startswith("a visitor: nobody here is awake")
    assert notice.payload["to"] == "a visitor" and "a visitor" in speakers
    assert not [t for t in (notice.payload["text"], *speakers) if "<!" in t]


async def test_the_words_are_stored_while_answers_are_thought_and_each_answer_on_its_own(
    store: Store,
) -> None:
    """The visitor's words are kept while the residents compose (a crash meanwhile loses
    nothing of them), and before any answer; each answer is stored, then posted, without
    waiting for the other resident's."""
    release, composing = asyncio.Event(), asyncio.Event()

    class HeldKlaus(ScriptedBrain):
        async def run(
            self, task: Task[Any, Any], inputs: Any, *, resident: str | None = None
        ) -> Any:
            if task is UTTER and resident == "Klaus Mueller":
                composing.set()
                await release.wait()
            return await super().run(task, inputs, resident=resident)

    engine = await make_engine(store, HeldKlaus())
    await until(engine, at_cafe(store, *CAFE_PAIR))
    posted: list[int] = []
    first_posted = asyncio.Event()

    async def post(ids: list[int]) -> None:
        posted.extend(ids)
        first_posted.set()

    said = asyncio.create_task(
        say(engine, Visit.of(HOBBS, "Alice", "Hello everyone!", "web", "a1"), post=post)
    )
    await asyncio.wait_for(composing.wait(), 30)
    await asyncio.wait_for(first_posted.wait(), 30)  # Isabella's, while Klaus composes
    assert [line.kind for line in lines(store)] == ["visitor", "resident"]
    release.set()
    result = await said
    assert [line.kind for line in lines(store)] == ["visitor", "resident", "resident"]
    assert sorted(posted) == sorted(result.outbox_ids) and len(result.outbox_ids) == 2

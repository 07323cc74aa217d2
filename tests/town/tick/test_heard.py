"""Visitors' words reach the residents there at the next tick, once each, even when written while
a tick was running; the answers residents gave are remembered by them."""

from __future__ import annotations

from tests.factories import CAFE_PAIR, at_cafe, memories, resident, until
from town.inputs.visit import Visit
from town.inputs.visitor import say
from town.outbox import chatlog
from town.store.db import Store
from town.tick.engine import Engine
from town.tick.heard import waiting
from town.tick.turn import Tick

HOBBS = "Hobbs Cafe"


def count(store: Store, name: str, words: str) -> int:
    return sum(words in m.text for m in memories(store, name))


async def test_words_are_taken_in_once_at_the_next_tick(store: Store, engine: Engine) -> None:
    await until(engine, at_cafe(store, *CAFE_PAIR))
    result = await say(engine, Visit.of(HOBBS, "Alice", "Klaus, is the coffee good?"))
    quote = 'Alice (a visitor) said: "Klaus, is the coffee good?"'
    with store.session() as s:
        assert waiting(s, engine.town_id, resident(store, "Maria Lopez")) == []
        assert waiting(s, engine.town_id, resident(store, "Klaus Mueller")) == [quote]
    await engine.tick()
    await engine.tick()
    assert [count(store, name, quote) for name in CAFE_PAIR] == [1, 1]
    (reply,) = result.replies
    assert count(store, reply.resident, f'said to Alice: "{reply.text}"') == 1


async def test_words_written_while_a_tick_ran_are_heard_at_the_one_after(
    store: Store, engine: Engine
) -> None:
    await until(engine, at_cafe(store, *CAFE_PAIR))
    run = engine._run

    async def meanwhile(tick: Tick) -> int:
        chain = await run(tick)
        with store.session() as s:  # (read for the clock only)
            clock = engine.town(s).clock
        chatlog.add_line(
            tick.session,
            engine.town_id,
            HOBBS,
            "Bo",
            chatlog.VISITOR,
            chatlog.thread_of("web", "b1"),
            "late words",
            clock,
            platform="web",
        )
        return chain

    engine._run = meanwhile  # type: ignore[method-assign]
    await engine.tick()
    engine._run = run  # type: ignore[method-assign]
    assert count(store, "Klaus Mueller", "late words") == 0
    await engine.tick()
    await engine.tick()
    assert count(store, "Klaus Mueller", 'Bo (a visitor) said: "late words"') == 1

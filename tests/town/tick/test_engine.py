"""Scenario tests of the engine on a three-resident town, with a scripted brain."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, time, timedelta
from typing import Any

import numpy as np
import pytest
from sqlmodel import col, select

from tests.factories import (
    CAFE_PAIR,
    MINITOWN,
    Streams,
    at_cafe,
    make_engine,
    memories,
    resident,
    resident_row,
    ticks,
    until,
)
from tests.fakes.brain import ScriptedBrain
from town.inputs.admin import set_object, whisper
from town.inputs.unit import UnknownResident, resident_named
from town.inputs.visit import Visit
from town.inputs.visitor import say
from town.llm.embedders import CachedEmbedder, HashEmbedder
from town.llm.task import Task
from town.memory.embedding_queue import flush_queues, shared_queue
from town.memory.stream import stored_text
from town.store.db import Store
from town.store.models import Conversation, Memory, PlanItem, Town, WorldObject
from town.tick.engine import Engine, TownChanged, talks_to_begin
from town.tick.mind import summary_queries
from town.tick.planning import current_action, replan_from_now
from town.tick.state import ResidentState
from town.tick.turn import Tick
from town.world.load import load_town
from town.world.places import UnknownPlace


async def test_burning_stove_is_noticed_next_tick_and_put_out(store: Store, engine: Engine) -> None:
    await until(engine, at_cafe(store, *CAFE_PAIR))  # Isabella and Klaus are up, at the cafe
    before = {n: _plan(store, n, ("hour", "action")) for n in CAFE_PAIR}
    assert await set_object(engine, "hobbs cafe: KITCHEN: stove", "burning") == (
        "Hobbs Cafe: kitchen: stove"
    )
    await engine.tick()  # noticed on the next tick: a rated observation of each one there
    for name in CAFE_PAIR:
        assert any("stove" in m.text and "burning" in m.text for m in memories(store, name))
    report = await engine.tick()  # the reaction, from the paper's two retrievals
    reacted = [e for e in report.events if e.kind == "reacted"]
    assert reacted and all("stove" in e.text for e in reacted)
    reactor = reacted[0].resident
    assert any("stopped to" in m.text for m in memories(store, reactor))
    assert "stove" in ResidentState.of(resident(store, reactor)).reaction
    # the plan is regenerated from now: finer items that were not over are gone
    pending = {
        p.id for p in before[reactor] if p.start + timedelta(minutes=p.duration_min) > report.clock
    }
    assert not pending & {p.id for p in _plan(store, reactor, ("hour", "action"))}
    report = await engine.tick()  # and what the reaction does to the stove
    changed = [e for e in report.events if e.kind == "object"]
    assert changed and changed[-1].data["state"] == "off"
    with store.session() as s:
        stove = s.exec(select(WorldObject).where(WorldObject.name == "stove")).one()
    assert stove.state == "off"


def _plan(store: Store, name: str, levels: tuple[str, ...]) -> list[PlanItem]:
    rid = resident(store, name).id
    with store.session() as s:
        return list(
            s.exec(
                select(PlanItem).where(PlanItem.resident_id == rid, col(PlanItem.level).in_(levels))
            ).all()
        )


async def test_inner_voice_changes_the_plan_and_comes_up_in_conversation(store: Store) -> None:
    brain = ScriptedBrain()
    engine = await make_engine(store, brain)
    await until(engine, at_cafe(store, *CAFE_PAIR))
    with pytest.raises(UnknownResident, match="residents: Isabella Rodriguez"):
        await whisper(engine, "Nobody", "hello")
    assert await whisper(engine, "Klaus", "You should tell Isabella about your research") == (
        "Klaus Mueller"
    )
    brain.enqueue(
        "react",
        {"react": True, "reaction": "going to talk to Isabella", "talk_to": "Isabella Rodriguez"},
        resident="Klaus Mueller",
    )
    await engine.tick()  # the inner voice is perceived: a directive memory
    klaus_mem = memories(store, "Klaus Mueller")
    assert any(m.kind == "directive" and "research" in m.text for m in klaus_mem)
    await engine.tick()  # he reacts: his plan changes, and he goes to talk to Isabella
    klaus_mem = memories(store, "Klaus Mueller")
    assert any("stopped to: going to talk to Isabella" in m.text for m in klaus_mem)
    assert ResidentState.of(resident(store, "Klaus Mueller")).talk is not None
    reports = await until(
        engine, lambda: ResidentState.of(resident(store, "Klaus Mueller")).talk is None
    )
    said = [e for r in reports for e in r.events if e.kind == "said"]
    assert said and said[0].resident == "Klaus Mueller"
    assert "research" in said[0].text  # the inner voice is what he brings up
    assert all(sum(e.kind == "said" for e in r.events) <= 1 for r in reports)  # a turn a tick
    with store.session() as s:
        talk = s.exec(select(Conversation).order_by(col(Conversation.id).desc())).first()
    assert talk is not None and talk.participants == ["Klaus Mueller", "Isabella Rodriguez"]
    speakers = [t["speaker"] for t in talk.turns]
    assert speakers == [
        ("Klaus Mueller", "Isabella Rodriguez")[i % 2] for i in range(len(speakers))
    ]
    assert 2 <= len(speakers) < 8 and talk.ended is not None  # it ended before the maximum
    assert ResidentState.of(resident(store, "Klaus Mueller")).directive == ""
    # both remember the talk, and they will not talk again at once
    assert any(m.kind == "chat" for m in memories(store, "Isabella Rodriguez"))
    assert "Isabella Rodriguez" in ResidentState.of(resident(store, "Klaus Mueller")).talked


async def test_reflection_fires_past_the_threshold_and_cites(store: Store) -> None:
    brain = ScriptedBrain()
    engine = await make_engine(store, brain)
    engine.reflect_threshold = 5
    steps: list[list[str]] = []  # each tick's tasks: questions, insights, storing a tick apart
    events = []
    for _ in range(30):
        seen = len(brain.history)
        report = await engine.tick()
        steps.append([c.task for c in brain.history[seen:]])
        events = [e for e in report.events if e.kind == "reflected"]
        if events:
            break
    assert events
    tasks = [t for step in steps for t in step if t.startswith("reflect")]
    asked = next(i for i, step in enumerate(steps) if "reflect_questions" in step)
    assert "reflect_insights" in steps[asked + 1] and "reflect_insights" not in steps[asked]
    assert tasks.count("reflect_questions") >= 1
    name = events[0].resident
    stored = [m for m in memories(store, name) if m.kind == "reflection"]
    own_ids = {m.id for m in memories(store, name)}
    assert stored and all(m.cites and set(m.cites) <= own_ids for m in stored)
    assert ResidentState.of(resident(store, name)).since_reflection < 5


class CalmBrain(ScriptedBrain):
    """Never reacts: residents only follow their plans."""

    async def run(self, task: Task[Any, Any], inputs: Any, *, resident: str | None = None) -> Any:
        if task.name == "react":
            self.enqueue("react", {"react": False, "reaction": "", "talk_to": None})
        return await super().run(task, inputs, resident=resident)


async def test_only_the_current_chunk_is_decomposed(store: Store) -> None:
    brain = CalmBrain()
    engine = await make_engine(store, brain)
    await until(engine, lambda: all(_plan(store, n, ("action",)) for n in CAFE_PAIR))
    for name in CAFE_PAIR:
        days = _plan(store, name, ("day",))
        hours = _plan(store, name, ("hour",))
        actions = _plan(store, name, ("action",))
        assert 5 <= len(days) <= 8
        assert {h.parent_id for h in hours} == {days[0].id}  # only the first chunk so far
        assert len({a.parent_id for a in actions}) == 1  # and only its current hour
    maria = [
        c for c in brain.history if c.resident == "Maria Lopez" and c.task != "rate_importance"
    ]
    assert maria == []  # asleep until 09:00: no thinking at all


async def test_plans_are_remembered_once_and_embedded_as_gists(
    store: Store,
) -> None:
    """With the embedding thread in use (memories recorded without waiting for their vectors):
    a chunk taken as its own hour item (no call) shares the chunk's memory; every decomposition
    that took a call is one memory, embedded as its gist."""
    brain = CalmBrain()
    with ThreadPoolExecutor(1) as pool:
        streams = Streams(pool)
        engine = await make_engine(store, brain, streams)
        await until(engine, lambda: len(_plan(store, "Isabella Rodriguez", ("action",))) >= 2)
        await ticks(engine, 6)
        flush_queues(pool, timeout=5)  # the buffered index writes
    name = "Isabella Rodriguez"
    days = {d.id: d for d in _plan(store, name, ("day",))}
    hours = _plan(store, name, ("hour",))
    plans = [m for m in memories(store, name) if m.kind == "plan"]
    decomposed = [c for c in brain.calls("decompose") if c.resident == name]
    assert len(plans) == len(days) + len(decomposed)  # nothing remembered twice
    for hour in hours:
        parent = days[hour.parent_id or 0]
        if parent.duration_min <= 60:
            assert hour.memory_id == parent.memory_id  # the chunk's own memory
        else:
            assert hour.memory_id not in {d.memory_id for d in days.values()}
    steps = [m for m in plans if " plans, at " in m.text]
    assert steps, "no decomposition was remembered"
    rid = resident(store, name).id
    assert rid is not None
    ids, vectors = streams.index.fetch(streams(rid).collection)
    by_id = dict(zip(ids.tolist(), vectors, strict=True))
    # "X plans, at P: Q: 09:00 a; 09:15 a; 09:30 b" -> "plans, at P: Q: a; b", in at most 12 words
    for memory in steps:
        assert memory.id is not None
        where, _, listed = memory.text.partition(" plans, at ")[2].partition(": ")
        sub, _, listed = listed.partition(": ")
        what = "; ".join(dict.fromkeys(step.split(" ", 1)[1] for step in listed.split("; ")))
        what = " ".join(what.split()[:12]).rstrip(";,")
        gist = f"plans, at {where}: {sub}: {what}"
        assert np.allclose(by_id[memory.id], streams.embedder.embed([gist])[0])


async def test_visitor_is_heard_by_everyone_present_and_no_one_else(
    store: Store, engine: Engine
) -> None:
    await until(engine, at_cafe(store, *CAFE_PAIR))
    with pytest.raises(UnknownPlace):
        await say(engine, Visit.of("the moon", "Alice", "hello"))
    result = await say(
        engine,
        Visit.of(
            "Hobbs Cafe", "Alice", "Hi Isabella! Is the cafe open? \x00" * 3, role="a reporter"
        ),
    )
    assert sorted(result.heard_by) == ["Isabella Rodriguez", "Klaus Mueller"]
    assert result.replies and result.replies[0].resident == "Isabella Rodriguez"
    await engine.tick()  # heard at once, perceived in the next tick's batch
    for name in ("Isabella Rodriguez", "Klaus Mueller"):
        assert any("Alice (a visitor, a reporter) said" in m.text for m in memories(store, name))
    assert not any("Alice" in m.text for m in memories(store, "Maria Lopez"))


async def test_huge_and_hostile_visitor_text_is_cut_not_crashing(
    store: Store, engine: Engine
) -> None:
    await until(engine, at_cafe(store, *CAFE_PAIR))
    result = await say(engine, Visit.of("Hobbs Cafe", "@everyone", "x" * 100_000 + "\u202e\x07"))
    assert len(result.heard_by) == 2
    await engine.tick()
    longest = max(len(m.text) for m in memories(store, "Klaus Mueller"))
    assert longest < 2200


class FailingBrain(ScriptedBrain):
    """Raises on the n-th call: a crash in the middle of a tick."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.fail_at = fail_at

    async def run(self, task: Task[Any, Any], inputs: Any, *, resident: str | None = None) -> Any:
        if len(self.history) + 1 == self.fail_at:
            self.fail_at = -1
            raise RuntimeError("the process died mid-tick")
        return await super().run(task, inputs, resident=resident)


async def test_a_tick_never_writes_over_what_another_writer_wrote(
    store: Store, engine: Engine
) -> None:
    """What inputs from elsewhere (another process, here another engine on the same store)
    wrote is never overwritten: the next tick sees it, and a tick that another writer overtook
    rolls back (``TownChanged``); the one after it goes on."""
    elsewhere = Engine(store, engine.spec, ScriptedBrain(), Streams(), engine.town_id)
    await engine.tick()
    await whisper(elsewhere, "Klaus", "Tell Isabella about your research")
    await set_object(elsewhere, "Hobbs Cafe: kitchen: stove", "burning")
    await engine.tick()
    # another writer between a tick's reading and its commit
    run = engine._run

    async def meddled(tick: Tick) -> int:
        chain = await run(tick)
        with store.engine.begin() as other:  # (as another process's tick would)
            other.exec_driver_sql(
                "UPDATE town SET revision = revision + 1 WHERE id = ?", (engine.town_id,)
            )
        return chain

    engine._run = meddled  # type: ignore[method-assign]
    with store.session() as s:
        clock = engine.town(s).clock
    with pytest.raises(TownChanged):  # it would write over what the other one wrote
        await engine.tick()
    engine._run = run  # type: ignore[method-assign]
    with store.session() as s:
        assert engine.town(s).clock == clock  # rolled back whole
    await engine.tick()
    klaus = memories(store, "Klaus Mueller")
    assert any(m.kind == "directive" and "research" in m.text for m in klaus)
    with store.session() as s:
        stove = s.exec(select(WorldObject).where(WorldObject.name == "stove")).one()
    assert stove.state == "burning"  # (noticed at this tick, put out at a later one)


async def test_a_crash_mid_tick_loses_nothing_and_the_town_resumes(store: Store) -> None:
    streams = Streams()
    engine = await make_engine(store, ScriptedBrain(), streams)
    await ticks(engine, 2)
    with store.session() as s:
        clock = s.exec(select(Town)).one().clock
        count = len(s.exec(select(Memory)).all())
    crashing = FailingBrain(fail_at=2)
    engine.brain = crashing
    with pytest.raises(RuntimeError):
        await engine.tick()
    with store.session() as s:
        assert s.exec(select(Town)).one().clock == clock  # the tick was rolled back whole
        assert len(s.exec(select(Memory)).all()) == count
    # a new process: new engine, new caches; it resumes at the same game time
    fresh = Engine(store, engine.spec, ScriptedBrain(), Streams(), engine.town_id)
    report = await fresh.tick()
    assert (report.clock - clock).total_seconds() == 600
    with store.session() as s:
        assert len(s.exec(select(Memory)).all()) >= count


def test_which_talks_begin_does_not_depend_on_which_reply_came_first() -> None:
    rows = {n: resident_row(n, location="Hobbs Cafe: counter") for n in "ABCDE"}
    rows["E"].state = {"talk": 7}  # already talking
    asked = [(False, "C", "B"), (False, "A", "B"), (True, "D", "C"), (False, "A", "E")]
    begun = set()
    for order in (asked, asked[::-1], asked[1:] + asked[:1]):
        tick = Tick(None, datetime(2023, 2, 13, 9, tzinfo=UTC), None, None, None, rows, {})  # type: ignore[arg-type]
        tick.talks = list(order)
        begun.add(tuple(talks_to_begin(tick)))
    assert begun == {(("D", "C"), ("A", "B"))}  # urged first; then A before C; E is busy


class AheadBrain(ScriptedBrain):
    """Rates importance only once the rated texts, and the relationship query of a reaction to
    each resident met, are cached: they were embedded ahead; and
    decides a reaction to another resident only once both names are cached (what each recalls
    if they talk)."""

    def __init__(self, cache: CachedEmbedder) -> None:
        super().__init__()
        self.cache = cache
        self.rated: list[str] = []
        self.greeted: list[str] = []
        self.met: list[str] = []
        self.names = {r.name for r in load_town(MINITOWN).residents}
        self.ticking = False  # (founding rates the seed memories as it stores them)

    async def run(self, task: Task[Any, Any], inputs: Any, *, resident: str | None = None) -> Any:
        if task.name == "rate_importance" and self.ticking:
            texts = [stored_text(t) for t in inputs.observations]
            met = [t.split(" is ")[0] for t in texts if t.split(" is ")[0] in self.names]
            asked = [f"What is {inputs.resident}'s relationship with {m}?" for m in met]
            await self._embedded_ahead(texts + asked)
            self.rated += texts
            self.met += met
        other = inputs.observation.split(" is ")[0] if task.name == "react" else ""
        if other in self.names and self.ticking:
            await self._embedded_ahead([other, inputs.resident])
            self.greeted.append(other)
        return await super().run(task, inputs, resident=resident)

    async def _embedded_ahead(self, texts: list[str]) -> None:
        for _ in range(500):
            if not self.cache.missing(texts):
                break
            await asyncio.sleep(0.01)
        assert not self.cache.missing(texts), f"not embedded ahead: {texts}"


async def test_what_a_tick_will_record_or_ask_is_embedded_ahead(store: Store) -> None:
    """Observations while their importance is rated (and the relationship query of a reaction
    to anyone met), a talk's lines as they are said, the two names a talk recalls while a
    resident decides how to react to the other, insights in the tick before they are stored,
    and a sleeper's summary queries in the hour before it wakes (those who wake in the town's
    first hour: when it is founded): recorded or asked for then, their vectors are in the cache
    (the embedding thread did them while the loop went on)."""
    cache = CachedEmbedder(HashEmbedder(64))
    brain = AheadBrain(cache)
    late = "Maria Lopez"  # wakes at 09:00
    queries = summary_queries(late)
    with ThreadPoolExecutor(1) as pool:
        streams = Streams(pool)
        streams.embedder = cache  # type: ignore[assignment]
        engine = await make_engine(store, brain, streams)
        shared_queue(cache, pool).flush().result(5)
        assert cache.missing(summary_queries("Isabella Rodriguez")) == []  # wakes at 07:00
        assert cache.missing(queries) == queries
        engine.reflect_threshold = 5
        brain.ticking = True
        talked = False
        insights: list[str] = []
        for _ in range(40):
            report = await engine.tick()
            talked = talked or any(e.kind == "conversation" for e in report.events)
            shared_queue(cache, pool).flush().result(5)  # what was asked for is embedded
            with store.session() as s:  # insights found this tick, stored as reflections next
                for row in engine.residents(s).values():
                    found = ResidentState.of(row).reflect_insights
                    insights += [stored_text(i["text"]) for i in found]
            assert cache.missing(insights) == []
            if report.clock.time() < time(8, 0):  # more than an hour before she wakes
                assert cache.missing(queries) == queries
            elif report.clock.time() < time(9, 0):
                assert cache.missing(queries) == []
                assert not ResidentState.of(resident(store, late)).awake
            if talked and report.clock.time() >= time(9, 0):
                break
        flush_queues(pool, timeout=5)
    assert talked, "no talk ended"
    assert any(" is " in t for t in brain.rated)  # observations
    assert any(" said: " in t for t in brain.rated)  # a talk's lines
    assert brain.greeted  # a reaction to another resident
    assert brain.met  # residents met, their relationship queries embedded while rating
    assert insights  # reflections, embedded before they are stored


async def test_a_reaction_drops_the_plan_items_not_yet_over(store: Store, engine: Engine) -> None:
    """Replanning deletes today's hour items and actions not yet over (and the actions under
    them); the day's chunks and what is over stay."""
    await ticks(engine, 4)  # (up, planned, an hour and its actions decomposed)
    with store.session() as session:
        town = session.get(Town, engine.town_id)
        assert town is not None
        tick = engine.new_tick(session, town.clock + timedelta(minutes=town.minutes_per_tick))
        today = select(PlanItem).where(PlanItem.day == tick.now.date())
        planned = {i.resident_id for i in session.exec(today).all()}
        row = next(r for r in tick.residents.values() if r.id in planned)
        assert await current_action(tick, row) is not None
        today = today.where(PlanItem.resident_id == row.id)
        before = {i.id for i in session.exec(today).all()}
        replan_from_now(tick, row)
        kept = {i.id for i in tick.plan_items(row)}
        for write in tick.writes:  # (what the tick writes at its commit)
            write(session)
        stored = session.exec(today).all()
        assert {i.id for i in stored} == kept
        assert {i.id for i in stored} < before  # the hour in force and its actions went
        assert all(
            i.level == "day" or i.start + timedelta(minutes=i.duration_min) <= tick.now
            for i in stored
        )
        assert any(i.level == "day" for i in stored)


def test_a_resident_is_named_by_its_full_or_first_name_in_any_case() -> None:
    names = ["Sam Moore", "Sam", "Isabella Rodriguez"]
    assert resident_named(names, "  sam   MOORE ") == "Sam Moore"
    assert resident_named(names, "sam") == "Sam"  # a full name before a first name
    assert resident_named(names, "isabella") == "Isabella Rodriguez"
    assert resident_named(names, "Rodriguez") is None
    assert resident_named([*names, ""], "  ") is None

"""Forget me: the member's rows, words, memories that hold or quote them, vectors and replay
lines go; the audit log keeps "forgotten visitor" rows; residents no longer know them."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, col, select

from bot.runtime.towns import replay_line
from tests.factories import CAFE_PAIR, T0, at_cafe, make_engine, memories, until
from tests.fakes.brain import ScriptedBrain
from tests.town.features.consent.support import (
    PHRASE,
    add_reflection,
    replay_holding,
    traces,
    vector_ids_without_memories,
)
from town.features.consent import forget as forgetting
from town.features.consent.forget import UnknownMember, find_members, finish_pending, forget
from town.features.consent.member import Member
from town.inputs import consent
from town.inputs.consent import set_muted
from town.inputs.query import interview
from town.inputs.visit import Visit
from town.inputs.visitor import say
from town.llm.task import Task
from town.outbox.events import TownEvent
from town.store.db import Store
from town.store.models import AuditEntry, ForgetOrder, Memory, OutboxEvent, Visitor
from town.tick.engine import Engine

HOBBS = "Hobbs Cafe"
USER = "u-prober-8841"
NEEDLES = [USER, "Prober", PHRASE]


async def _known_member(store: Store, replay: Path) -> Engine:
    """Prober has talked at the cafe, been heard, answered and reflected on."""
    engine = await make_engine(store)
    await until(engine, at_cafe(store, *CAFE_PAIR))
    first = await say(
        engine,
        Visit.of(HOBBS, "Prober", f"Hi Isabella, {PHRASE}!", platform="discord", user_id=USER),
    )
    await say(
        engine,
        Visit.of(HOBBS, "Dana", "Good morning everyone", platform="discord", user_id="u-dana"),
    )
    await engine.tick()
    await engine.tick()
    with replay.open("w", encoding="utf-8") as out:
        for event in first.replies:
            out.write(replay_line(event) + "\n")
        other = TownEvent("said", HOBBS, event.at, "Klaus Mueller", "Lovely weather")
        out.write(replay_line(other) + "\n")
    return engine


def _ids(store: Store, name: str, holding: str) -> list[int]:
    return [m.id or 0 for m in memories(store, name) if holding in m.text]


async def test_forget_me_leaves_no_trace_and_residents_do_not_know_them(
    store: Store, tmp_path: Path
) -> None:
    replay = tmp_path / "replay.jsonl"
    engine = await _known_member(store, replay)
    about = _ids(store, "Isabella Rodriguez", "Prober")
    others = _ids(store, "Isabella Rodriguez", "Dana")
    assert about and others and traces(store, NEEDLES) and replay_holding(replay, NEEDLES)
    only = add_reflection(store, "Isabella Rodriguez", "Someone odd came by", about)
    mixed = add_reflection(store, "Isabella Rodriguez", "The cafe is busy", about + others)
    with store.session() as s:
        rows_before = len(s.exec(select(AuditEntry.id)).all())

    done = await forget(engine, "discord", USER, replays=[replay])

    assert done.erased["visitors"] == 1 and done.erased["memories"] >= len(about) + 1
    assert traces(store, NEEDLES) == []  # every table
    assert vector_ids_without_memories(engine, store) == []
    assert replay_holding(replay, NEEDLES) == []
    assert "Lovely weather" in replay.read_text(encoding="utf-8")
    with store.session() as s:
        assert s.get(Memory, only) is None
        kept = s.get(Memory, mixed)
        assert kept is not None and kept.cites == others
        rows = s.exec(select(AuditEntry)).all()
        assert len(rows) == rows_before + 1  # counts stay true, and the forget is recorded
        assert [r.text for r in rows if r.kind == "forget"] == ["a member was forgotten (asked)"]
        assert s.exec(select(AuditEntry).where(AuditEntry.who == "forgotten visitor")).first()
        assert s.exec(select(ForgetOrder)).one().done_at is not None
    answer = await interview(engine, "Isabella", "What do you know about Prober?")
    assert "walrus" not in answer.casefold()
    with store.session() as s:
        assert not any("prober" in m.text.casefold() for m in s.exec(select(Memory)))
    await engine.tick()  # the town goes on
    assert traces(store, [USER, PHRASE]) == []


async def test_forgetting_someone_the_town_never_met_says_so_and_changes_nothing(
    store: Store,
) -> None:
    engine = await make_engine(store)
    await engine.tick()
    before = traces(store, ["Isabella"])
    with pytest.raises(UnknownMember, match="nothing was changed"):
        await forget(engine, "discord", "u-nobody")
    assert traces(store, ["Isabella"]) == before
    with store.session() as s:
        assert s.exec(select(ForgetOrder)).first() is None
        assert find_members(s, engine.town_id, "Nobody At All") == []


async def test_a_forget_a_crash_cut_short_finishes_on_the_next_start(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    replay = tmp_path / "replay.jsonl"
    engine = await _known_member(store, replay)

    def crash(*args: object) -> None:
        raise RuntimeError("killed")

    with replay.open("a", encoding="utf-8") as out:  # their words alone, without their name
        quoted = TownEvent("said", HOBBS, T0, "Klaus Mueller", f"Hi Isabella, {PHRASE}!")
        out.write(replay_line(quoted) + "\n")
    monkeypatch.setattr(forgetting, "_outside", crash)
    with pytest.raises(RuntimeError):
        await forget(engine, "discord", USER, replays=[replay])
    with store.session() as s:
        pending = s.exec(select(ForgetOrder).where(col(ForgetOrder.done_at).is_(None))).one()
        assert pending.platform_user_id == USER  # recorded before it began
    assert replay_holding(replay, NEEDLES)  # the crash came before the replays
    monkeypatch.undo()

    assert await finish_pending(engine, [replay]) == 1
    assert traces(store, NEEDLES) == []
    assert replay_holding(replay, NEEDLES) == []
    assert vector_ids_without_memories(engine, store) == []
    assert await finish_pending(engine, [replay]) == 0


async def test_a_member_is_found_by_name_id_or_mention(store: Store, tmp_path: Path) -> None:
    engine = await _known_member(store, tmp_path / "r.jsonl")
    with store.session() as s:
        for who in ("Prober", "@prober", f"discord:{USER}", f"<@{USER}>", f"<@{USER}|prober>"):
            assert find_members(s, engine.town_id, who) == [("discord", USER)], who
        assert s.exec(select(Visitor).where(Visitor.platform_user_id == USER)).one()


async def test_ids_with_like_wildcards_forget_only_their_member(store: Store) -> None:
    engine = await make_engine(store)
    await until(engine, at_cafe(store, *CAFE_PAIR))
    await say(
        engine,
        Visit.of(
            HOBBS, "Una", "Isabella, unicorns drink oat lattes", user_id="v_1", platform="web"
        ),
    )
    await say(
        engine,
        Visit.of(HOBBS, "Vic", "Isabella, volcanoes bake bread", user_id="vx1", platform="web"),
    )
    await engine.tick()
    await forget(engine, "web", "v_1")
    assert traces(store, ["unicorns drink"]) == []
    assert traces(store, ["volcanoes bake"])  # another member, whose id the wildcard fits


class _HeldAnswer(ScriptedBrain):
    """A scripted brain whose visitor answers wait at ``gate`` (``composing`` is set)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate, self.composing = asyncio.Event(), asyncio.Event()

    async def run(self, task: Task[Any, Any], inputs: Any, *, resident: str | None = None) -> Any:
        if task.name == "utter":
            self.composing.set()
            await self.gate.wait()
        return await super().run(task, inputs, resident=resident)


@pytest.mark.parametrize("how", ["forget", "mute"])
async def test_an_answer_composed_while_its_member_is_forgotten_or_muted_is_dropped(
    store: Store, how: str
) -> None:
    brain = _HeldAnswer()
    engine = await make_engine(store, brain)
    await until(engine, at_cafe(store, *CAFE_PAIR))
    visit = Visit.of(HOBBS, "Prober", f"Isabella, {PHRASE}!", platform="discord", user_id=USER)
    stored, loop = asyncio.Event(), asyncio.get_running_loop()
    engine.after_commit = lambda: loop.call_soon_threadsafe(stored.set)  # the visitor's words
    saying = asyncio.create_task(say(engine, visit))
    await asyncio.wait_for(asyncio.gather(brain.composing.wait(), stored.wait()), 30)
    assert traces(store, [USER])
    if how == "forget":
        await forget(engine, "discord", USER, reason="ban")
    else:
        set_muted(engine, "discord", USER, True)
    brain.gate.set()
    result = await saying
    assert result.replies == [] and result.outbox_ids == []
    with store.session() as s:
        answers = [e for e in s.exec(select(OutboxEvent)) if e.kind == "said"]
    assert answers == []
    if how == "forget":
        assert traces(store, NEEDLES) == []


ZEB = "u-zebulon-5521"


async def test_forget_takes_the_first_name_an_answer_used_out_of_every_table(
    store: Store, tmp_path: Path
) -> None:
    engine = await make_engine(store)
    await until(engine, at_cafe(store, *CAFE_PAIR))
    visit = Visit.of(
        HOBBS, "Zebulon Quux", f"Hi Isabella, {PHRASE}!", platform="discord", user_id=ZEB
    )
    said = await say(engine, visit)
    assert any("Zebulon" in r.text and "Quux" not in r.text for r in said.replies)
    await engine.tick()
    assert traces(store, ["Zebulon"])
    await forget(engine, "discord", ZEB)
    assert traces(store, ["Zebulon", "Quux", ZEB, PHRASE]) == []
    assert traces(store, ["Isabella Rodriguez"])  # a resident's name stays


def test_a_member_is_found_under_look_alike_spellings_but_never_a_residents_name() -> None:
    member = Member(
        "discord", ZEB, ("Zebulon Quux",), spared=("Isabella Rodriguez", "Klaus Mueller")
    )
    for text in (
        "Hi Zebulon!",
        "zebulon quux was here",
        "Z_e_b_u_l_o_n said so",
        "Z e b u l o n  Q u u x",
        "Zebu.lon-Quux",
        "Zeb\u200bulon",
    ):
        assert member.held_in(text), text
        assert "forgotten visitor" in member.redact(text), text
        assert "ebu" not in member.redact(text).casefold(), text
    for text in ("Zebulons", "Isabella is here", "zebra"):
        assert not member.held_in(text), text
    named_like = Member("web", "v-1", ("Isabella Smith", "The Reporter"), spared=("Isabella R",))
    assert not named_like.held_in("Isabella opens the cafe; a reporter is gone")
    assert named_like.held_in("Isabella Smith and The Reporter")


async def test_an_answer_written_as_its_member_is_forgotten_is_found_by_the_forget(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The injected order: the answer checks its member is still there, and a forget runs
    before the answer's write commits, if it can (it cannot: the check takes the store's
    writer lock, so the forget comes after the write and redacts it)."""
    engine = await make_engine(store)
    await until(engine, at_cafe(store, *CAFE_PAIR))
    loop, real = asyncio.get_running_loop(), consent.still_heard
    gaps: list[bool] = []

    def check_then_forget_if_it_fits(session: Session, *member: str) -> bool:
        kept = real(session, *member)
        other = sqlite3.connect(str(store.engine.url.database), timeout=0)
        try:  # can another writer commit before the answer's write?
            other.execute("BEGIN IMMEDIATE")
            other.rollback()
            gaps.append(True)
        except sqlite3.OperationalError:  # locked: the check and the write are one transaction
            gaps.append(False)
        finally:
            other.close()
        if gaps[-1]:  # a forget fits in between: it runs there
            asyncio.run_coroutine_threadsafe(forget(engine, "discord", ZEB), loop).result()
        return kept

    monkeypatch.setattr(consent, "still_heard", check_then_forget_if_it_fits)
    visit = Visit.of(
        HOBBS, "Zebulon Quux", f"Hi Isabella, {PHRASE}!", platform="discord", user_id=ZEB
    )
    said = await say(engine, visit)
    assert said.replies and gaps and not any(gaps)
    await forget(engine, "discord", ZEB)
    assert traces(store, ["Zebulon", ZEB, PHRASE]) == []

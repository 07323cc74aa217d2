"""Mute: the residents neither hear nor answer a muted member, whose words are only audited.
Channel switches: a quiet channel gets no narration, a closed one no resident's post."""

from __future__ import annotations

from sqlmodel import select

from tests.factories import CAFE_PAIR, at_cafe, make_engine, memories, until
from town.inputs.consent import MUTED, is_muted, set_muted
from town.inputs.visit import Visit
from town.inputs.visitor import say
from town.outbox.events import TownEvent, write_outbox
from town.outbox.switches import CLOSED, OPEN, QUIET, set_switch, switches
from town.store.db import Store
from town.store.models import AuditEntry, OutboxEvent, Visitor
from town.tick.engine import Engine

HOBBS = "Hobbs Cafe"


async def _cafe(store: Store) -> Engine:
    engine = await make_engine(store)
    await until(engine, at_cafe(store, *CAFE_PAIR))
    return engine


async def test_a_muted_member_is_audited_only_and_unmuted_is_heard_again(store: Store) -> None:
    engine = await _cafe(store)
    assert set_muted(engine, "slack", "U-MUTE", True)
    assert not set_muted(engine, "slack", "U-MUTE", True)  # already
    result = await say(
        engine,
        Visit.of(
            HOBBS, "Quiet Quinn", "Isabella, zebra umbrellas!", platform="slack", user_id="U-MUTE"
        ),
    )
    assert result.replies == [] and result.heard_by == []
    await engine.tick()
    await engine.tick()
    for name in CAFE_PAIR:
        assert not any("zebra" in m.text or "Quinn" in m.text for m in memories(store, name))
    with store.session() as s:
        assert is_muted(s, engine.town_id, "slack", "U-MUTE")
        (row,) = s.exec(select(AuditEntry).where(AuditEntry.kind == MUTED)).all()
        assert "zebra umbrellas" in row.text and row.who.endswith("(slack:U-MUTE)")
        assert s.exec(select(Visitor).where(Visitor.platform_user_id == "U-MUTE")).first() is None
        assert not s.exec(select(OutboxEvent)).all() or all(
            "Quinn" not in str(e.payload) for e in s.exec(select(OutboxEvent))
        )
    assert set_muted(engine, "slack", "U-MUTE", False)
    again = await say(
        engine,
        Visit.of(HOBBS, "Quiet Quinn", "Isabella, hello!", platform="slack", user_id="U-MUTE"),
    )
    assert again.replies


async def test_a_closed_place_hears_a_visitor_but_nobody_answers_there(store: Store) -> None:
    engine = await _cafe(store)
    with engine.unit(changes_town=False) as s:
        set_switch(s, engine.town_id, HOBBS, CLOSED)
    result = await say(
        engine, Visit.of(HOBBS, "Dana", "Isabella, hello there", platform="web", user_id="d")
    )
    assert result.replies == []
    await engine.tick()
    assert any("hello there" in m.text for m in memories(store, "Isabella Rodriguez"))


def _event(kind: str, **data: str) -> TownEvent:
    from tests.factories import T0

    return TownEvent(kind, HOBBS, T0, "Isabella Rodriguez", f"a {kind}", dict(data))


async def test_quiet_keeps_speech_and_closed_keeps_only_notices(store: Store) -> None:
    engine = await make_engine(store)
    events = [
        _event("action"),
        _event("said"),
        _event("said", reply_to="Dana"),
        _event("notice", to="Dana"),
    ]
    with engine.unit(changes_town=False) as s:
        set_switch(s, engine.town_id, HOBBS, QUIET)
        assert switches(s, engine.town_id) == {HOBBS: QUIET}
        quiet = [r.kind for r in write_outbox(s, engine.town_id, "q", events)]
        set_switch(s, engine.town_id, HOBBS, CLOSED)
        closed = [
            (r.kind, r.payload.get("reply_to"))
            for r in write_outbox(s, engine.town_id, "c", events)
        ]
        set_switch(s, engine.town_id, HOBBS, OPEN)
        assert switches(s, engine.town_id) == {}
        opened = write_outbox(s, engine.town_id, "o", events)
    assert quiet == ["said", "said", "notice"]
    assert closed == [("said", "Dana"), ("notice", None)]
    assert len(opened) == 4

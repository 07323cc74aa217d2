"""A reaction stored against a resident's message, heard by the resident; a muted member's
never stored; which reactions mean what; the live figures and their intervals."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlmodel import select

from bot.runtime.run import TownRuntime
from tests.factories import resident
from tests.town.features.ratings.support import shown
from town.experiments.live import Group, bradley_terry, live_figures, parse_since, wilson
from town.features.consent.forget import forget
from town.features.ratings.moods import DEFAULT_MOODS, Moods
from town.features.ratings.reactions import Reacted, pseudonym, react
from town.inputs.consent import set_muted
from town.store.models import AuditEntry, PendingInput, Reaction
from town.tick.state import ResidentState


def heard_next(runtime: TownRuntime, name: str) -> list[str]:
    """What the resident will hear at the next tick (pending inputs)."""
    with runtime.store.session() as s:
        return list(s.exec(select(PendingInput.text).where(PendingInput.resident == name)).all())


def reactions(runtime: TownRuntime) -> list[Reaction]:
    with runtime.store.session() as s:
        return list(s.exec(select(Reaction)).all())


async def test_a_reaction_is_stored_with_what_the_message_was_and_heard(
    runtime: TownRuntime,
) -> None:
    engine = runtime.opened.engine
    said = shown(
        runtime.store, runtime.town_id, "Klaus Mueller", "Hi!", reply_to="Robin", model="model-a"
    )
    assert await react(engine, Reacted("web", "v-robin", "Robin", said, "😂"))
    [row] = reactions(runtime)
    assert (row.resident, row.task, row.model, row.place, row.emoji) == (
        "Klaus Mueller",
        "visitor",
        "model-a",
        "Hobbs Cafe",
        "😂",
    )
    assert row.member == pseudonym(runtime.town_id, "web", "v-robin") != "v-robin"
    assert heard_next(runtime, "Klaus Mueller") == ['Robin reacted with 😂 to what I said: "Hi!"']
    await runtime.opened.engine.tick(force=True)  # the next tick takes it in
    assert heard_next(runtime, "Klaus Mueller") == []
    with runtime.store.session() as s:
        audited = s.exec(select(AuditEntry).where(AuditEntry.kind == "react")).one()
    assert audited.text == '😂 to Klaus Mueller: "Hi!"' and "v-robin" in audited.who

    narration = shown(runtime.store, runtime.town_id, "", "The cafe opens.", kind="action")
    assert not await react(engine, Reacted("web", "v-robin", "Robin", narration, "👍"))
    assert not await react(engine, Reacted("web", "v-robin", "Robin", "web:nothing", "👍"))
    with pytest.raises(ValueError, match="emoji"):
        await react(engine, Reacted("web", "v-robin", "Robin", said, "  "))
    assert len(reactions(runtime)) == 1


async def test_a_muted_members_reaction_is_not_stored(runtime: TownRuntime) -> None:
    said = shown(runtime.store, runtime.town_id, "Klaus Mueller", "Hello.")
    muted = await react(
        runtime.opened.engine,
        Reacted("web", "v-quiet", "Quiet", said, "👍"),
        muted=lambda session, town_id, platform, user_id: user_id == "v-quiet",
    )
    assert not muted and reactions(runtime) == []
    assert ResidentState.of(resident(runtime.store, "Klaus Mueller")).inbox == []
    assert heard_next(runtime, "Klaus Mueller") == []


async def test_a_member_muted_by_the_consent_feature_is_not_rated(
    runtime: TownRuntime,
) -> None:
    set_muted(runtime.opened.engine, "web", "v-quiet", True)
    said = shown(runtime.store, runtime.town_id, "Klaus Mueller", "Hello.")
    await runtime.reacted(Reacted("web", "v-quiet", "Quiet", said, "👍"))
    assert reactions(runtime) == []


async def test_a_forgotten_members_reactions_go_with_them(runtime: TownRuntime) -> None:
    said = shown(runtime.store, runtime.town_id, "Klaus Mueller", "Hello.")
    await runtime.reacted(Reacted("web", "v-robin", "Robin", said, "👍"))
    await runtime.reacted(Reacted("web", "v-other", "Sam", said, "👍"))
    assert len(reactions(runtime)) == 2
    await forget(runtime.opened.engine, "web", "v-robin")
    assert [r.member for r in reactions(runtime)] == [pseudonym(runtime.town_id, "web", "v-other")]


def test_which_reactions_mean_what() -> None:
    assert [DEFAULT_MOODS.of(e) for e in ("👍", "❤", "❤️", "👍🏽", "🙄", "🎉", ":pepe:")] == [
        "up",
        "up",
        "up",
        "up",
        "down",
        "other",
        "other",
    ]
    mine = Moods.of_lists(["🔥", ":pepe:"], ["💤"])
    assert [mine.of(e) for e in ("🔥", ":pepe:", "💤", "👍")] == ["up", "up", "down", "other"]
    with pytest.raises(ValueError, match="both up and down"):
        Moods.of_lists(["👍"], ["👍️"])


def test_wilson_interval_and_spans() -> None:
    low, high = wilson(8, 10)
    assert (round(low, 4), round(high, 4)) == (0.4902, 0.9433)  # the textbook 8/10
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(10, 10)[1] == pytest.approx(1.0)
    assert parse_since("7d") == timedelta(days=7) and parse_since("12h") == timedelta(hours=12)
    for bad in ("7", "0d", "soon", "-1d"):
        with pytest.raises(ValueError, match="since"):
            parse_since(bad)


async def test_live_figures_count_shown_reacted_and_rated(runtime: TownRuntime) -> None:
    engine, town = runtime.opened.engine, runtime.town_id
    ids = [shown(runtime.store, town, "Klaus Mueller", f"line {n}", model="a") for n in range(4)]
    ids += [shown(runtime.store, town, "Maria Lopez", f"line {n}", model="b") for n in range(2)]
    votes = [(0, "u1", "👍"), (0, "u2", "😂"), (1, "u1", "👎"), (2, "u1", "🎉"), (4, "u1", "👍")]
    for n, who, emoji in votes:
        await react(engine, Reacted("web", who, who, ids[n], emoji))
    with runtime.store.session() as s:
        figures = live_figures(s, town, DEFAULT_MOODS, by="model", since=None)
    got = {g.name: g for g in figures.groups}
    a, b = got["a"], got["b"]
    assert (a.shown, a.reacted, a.rated_up, a.rated_down) == (4, 3, 1, 1)
    assert a.reactions == {"up": 2, "down": 1, "other": 1} and a.share_up == 0.5
    assert (b.shown, b.reacted, b.rated_up, b.share_up) == (2, 1, 1, 1.0)
    assert b.low is not None and round(b.low, 3) == 0.207  # one of one: wide
    assert a.strength is not None and b.strength is not None and b.strength > a.strength
    with pytest.raises(ValueError, match="one of"):
        live_figures(s, town, DEFAULT_MOODS, by="colour", since=None)


def test_bradley_terry_of_two_groups_is_their_head_to_head_share() -> None:
    ahead, behind = Group("a", rated_up=3, rated_down=1), Group("b", rated_up=1, rated_down=3)
    bradley_terry([ahead, behind])
    assert ahead.strength is not None and behind.strength is not None
    p = ahead.strength / (ahead.strength + behind.strength)
    assert p == pytest.approx((3 * 3 + 0.5 * (3 + 3) + 0.5) / (4 * 4 + 1))  # wins / games
    assert ahead.strength * behind.strength == pytest.approx(1.0)
    alone = Group("c", rated_up=2)
    bradley_terry([alone])
    assert alone.strength is None  # nothing to compare with

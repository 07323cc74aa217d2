"""Members' reactions to residents' webhook messages on Discord: stored against the message,
heard by the resident, taken back on removal, and counted by ``eval live``."""

from __future__ import annotations

from typing import Any

from sqlmodel import select

from adapters.discord.adapter import DiscordAdapter
from standins.discord.server import FakeDiscord
from tests.adapters.discord.support import add_event, inbox, morning, pump, until
from town.experiments.live import live_figures
from town.features.ratings.moods import DEFAULT_MOODS
from town.store.models import Reaction


def reactions(runtime: Any) -> list[Reaction]:
    with runtime.store.session() as s:
        return list(s.exec(select(Reaction).order_by(Reaction.id)).all())  # type: ignore[arg-type]


async def test_reactions_on_a_residents_message_are_stored_heard_and_counted(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await morning(runtime)
    pump(runtime, adapter).recover()
    add_event(runtime, "Hobbs Cafe", "said", "Klaus Mueller", "The strudel is fresh today.")
    add_event(runtime, "Hobbs Cafe", "said", "Isabella Rodriguez", "Coffee is on the house.")
    await pump(runtime, adapter).deliver_pending()
    messages = fake.webhook_messages()
    (klaus,) = [m for m in messages if "strudel" in m["content"]]
    (isabella,) = [m for m in messages if "Coffee" in m["content"]]
    robin, sam = fake.add_member("Robin"), fake.add_member("Sam")

    assert await fake.member_reacts(robin, klaus, "😂")
    await fake.member_reacts(sam, klaus, "👍")
    await fake.member_reacts(sam, isabella, "🙄")
    await fake.member_reacts(robin, isabella, "partyparrot:123456789012345678")
    await until(lambda: len(reactions(runtime)) == 4)
    stored = reactions(runtime)
    assert [(r.resident, r.emoji, r.task, r.place) for r in stored] == [
        ("Klaus Mueller", "😂", "conversation", "Hobbs Cafe"),
        ("Klaus Mueller", "👍", "conversation", "Hobbs Cafe"),
        ("Isabella Rodriguez", "🙄", "conversation", "Hobbs Cafe"),
        ("Isabella Rodriguez", ":partyparrot:", "conversation", "Hobbs Cafe"),
    ]
    assert all(robin["id"] not in r.member and len(r.member) == 32 for r in stored)  # pseudonym
    assert 'Robin reacted with 😂 to what I said: "The strudel is fresh today."' in inbox(
        runtime, "Klaus Mueller"
    )

    await fake.member_reacts(sam, isabella, "🙄", removed=True)
    await until(lambda: len(reactions(runtime)) == 3)
    with runtime.store.session() as s:
        figures = live_figures(s, runtime.town_id, DEFAULT_MOODS, by="resident", since=None)
    got = {g.name: g for g in figures.groups}
    assert (got["Klaus Mueller"].reacted, got["Klaus Mueller"].rated_up) == (1, 1)
    assert got["Klaus Mueller"].reactions == {"up": 2, "down": 0, "other": 0}
    assert (got["Isabella Rodriguez"].reacted, got["Isabella Rodriguez"].rated_up) == (1, 0)
    assert got["Isabella Rodriguez"].share_up is None  # only an "other" reaction: not rated


async def test_reactions_on_others_messages_and_the_bots_own_are_not_kept(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    await morning(runtime)
    pump(runtime, adapter).recover()
    robin = fake.add_member("Robin")
    cafe = next(c for c in fake.channels.values() if c.get("name") == "hobbs-cafe")
    own = await fake.member_says(robin, cafe["id"], "my own words")
    await fake.member_reacts(robin, own, "👍")
    add_event(runtime, "Hobbs Cafe", "said", "Klaus Mueller", "Hello there.")
    await pump(runtime, adapter).deliver_pending()
    (klaus,) = [m for m in fake.webhook_messages() if "Hello there" in m["content"]]
    await fake.member_reacts(robin, klaus, "⭐")  # the last: all before it were handled
    await until(lambda: len(reactions(runtime)) >= 1)
    assert [r.emoji for r in reactions(runtime)] == ["⭐"]

"""Members' reactions to residents' messages on Slack (``reaction_added``/``_removed``, signed
events as Slack sends them): stored against the message, heard, counted by ``eval live``."""

from __future__ import annotations

from typing import Any

from sqlmodel import select

from adapters.slack.adapter import SlackAdapter
from adapters.slack.reactions import emoji_of
from adapters.slack.text import channel_name
from bot.runtime.run import TownRuntime
from standins.slack.workspace import BOT_USER_ID, FakeSlack
from tests.adapters.slack.support import MEMBER, event_callback, post, pump, say_in_outbox
from town.experiments.live import live_figures
from town.features.ratings.moods import DEFAULT_MOODS
from town.store.models import Reaction, Resident


def reaction(channel: str, ts: str, name: str, *, user: str = MEMBER, added: bool = True) -> Any:
    return event_callback(
        {
            "type": "reaction_added" if added else "reaction_removed",
            "user": user,
            "reaction": name,
            "item_user": BOT_USER_ID,
            "item": {"type": "message", "channel": channel, "ts": ts},
        }
    )


def stored(runtime: TownRuntime) -> list[tuple[str, str, str]]:
    with runtime.store.session() as s:
        rows = s.exec(select(Reaction).order_by(Reaction.id)).all()  # type: ignore[arg-type]
        return [(r.resident, r.emoji, r.task) for r in rows]


def test_slack_short_names_are_read_as_emoji() -> None:
    assert [emoji_of(n) for n in ("+1", "thumbsup::skin-tone-3", "joy", "-1", "partyparrot")] == [
        "👍",
        "👍",
        "😂",
        "👎",
        ":partyparrot:",
    ]


async def test_reactions_to_a_residents_message_are_stored_and_taken_back(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    with runtime.store.session() as s:
        somebody = s.exec(select(Resident)).first()
        assert somebody is not None
        area, name = somebody.location.split(":")[0], somebody.name
    say_in_outbox(runtime, area, name, "Lovely weather for a walk.", "k1")
    await pump(runtime, adapter, []).deliver_pending()
    [(channel, _, ts)] = [
        p for p in slack.outbox_posts() if p[1].startswith(f"{runtime.town_id}:k1")
    ]
    assert channel == slack.channel_id(channel_name("mini", area))

    assert await post(adapter, reaction(channel, ts, "+1")) == 200
    await post(adapter, reaction(channel, ts, "joy", user="U0OTHER"))
    await post(adapter, reaction(channel, ts, "tada"))
    await post(adapter, reaction(channel, "1.000001", "+1"))  # not a resident's message
    await post(adapter, reaction(channel, ts, "-1", user=BOT_USER_ID))  # the bot's own
    assert stored(runtime) == [
        (name, "👍", "conversation"),
        (name, "😂", "conversation"),
        (name, "🎉", "conversation"),
    ]

    await post(adapter, reaction(channel, ts, "+1", added=False))
    assert stored(runtime) == [(name, "😂", "conversation"), (name, "🎉", "conversation")]
    with runtime.store.session() as s:
        [group] = live_figures(s, runtime.town_id, DEFAULT_MOODS, by="place", since=None).groups
    assert (group.name, group.shown, group.reacted, group.rated_up) == (area, 1, 1, 1)
    assert group.reactions == {"up": 1, "down": 0, "other": 1}

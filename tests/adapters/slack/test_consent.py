"""Members decide what the town keeps of them, on Slack: forget-me and mute by /town, and a
member removed from the workspace (deactivated: ``user_change`` with ``deleted``) is forgotten."""

from __future__ import annotations

import json

from adapters.slack.adapter import SlackAdapter
from bot.runtime.run import TownRuntime
from standins.slack.workspace import FakeSlack
from tests.adapters.consent_support import PHRASE, held_anywhere, knows, remembered, write_replay
from tests.adapters.slack.support import CAFE, event_callback, message, post, press, slash

ZEPH = "U0ZEPHYR"


async def _heard(runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack, words: str) -> None:
    """Zephyrine spoke at the cafe, in the morning, and was heard at the next tick."""
    slack.add_user(ZEPH, "Zephyrine Quill")
    for _ in range(4):
        await runtime.opened.engine.tick()
    assert await post(adapter, message(slack.channel_id(CAFE), words, user=ZEPH)) == 200
    await runtime.opened.engine.tick()
    assert remembered(runtime, words)


async def test_forget_me_on_slack_leaves_nothing_of_the_member(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    await _heard(runtime, adapter, slack, f"Isabella, {PHRASE}!")
    write_replay(runtime)
    needles = [ZEPH, "Zephyrine", PHRASE]
    assert held_anywhere(runtime, needles)
    cafe = slack.channel_id(CAFE)
    await post(adapter, slash("forget-me", ZEPH, cafe, slack, "ask"), form=True)
    assert "forget-me confirm" in slack.responses[-1]["text"]
    assert slack.responses[-1]["response_type"] == "ephemeral"
    await post(adapter, slash("forget-me confirm", ZEPH, cafe, slack, "go"), form=True)
    assert "forgotten you" in slack.responses[-1]["text"]
    assert held_anywhere(runtime, needles) == []
    assert not await knows(runtime, "Isabella", "Zephyrine")


async def test_a_muted_member_is_neither_heard_nor_answered_on_slack(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    slack.add_user(ZEPH, "Zephyrine Quill")
    for _ in range(4):
        await runtime.opened.engine.tick()
    cafe = slack.channel_id(CAFE)
    await post(adapter, slash("mute", ZEPH, cafe, slack, "mute"), form=True)
    assert slack.responses[-1]["text"].startswith("Muted")
    posts = len(slack.outbox_posts())
    await post(adapter, message(cafe, "Isabella, zebra umbrellas for all!", user=ZEPH))
    await post(adapter, slash("look", ZEPH, cafe, slack, "look"), form=True)
    assert slack.responses[-1]["text"].startswith("Hobbs Cafe")  # commands still work
    await runtime.opened.engine.tick()
    await runtime.opened.engine.tick()
    assert not remembered(runtime, "zebra umbrellas") and not remembered(runtime, "Zephyrine")
    assert not [p for p in slack.outbox_posts()[posts:] if "Zephyrine" in p[2]]


async def test_a_member_removed_from_the_workspace_is_forgotten(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    await _heard(runtime, adapter, slack, f"Isabella, {PHRASE}!")
    removed = {**slack.users[ZEPH], "deleted": True}
    assert await post(adapter, event_callback({"type": "user_change", "user": removed})) == 200
    assert held_anywhere(runtime, [ZEPH, "Zephyrine", PHRASE]) == []


def _button(answer: dict[str, object]) -> dict[str, object]:
    blocks = answer["blocks"]
    assert isinstance(blocks, list)
    (button,) = blocks[-1]["elements"]
    assert button["text"]["text"] == "Forget me" and button["style"] == "danger"
    return dict(button)


async def test_forget_me_has_a_private_confirmation_button(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    await _heard(runtime, adapter, slack, f"Isabella, {PHRASE}!")
    cafe = slack.channel_id(CAFE)
    await post(adapter, slash("forget-me", ZEPH, cafe, slack, "ask"), form=True)
    asked = slack.responses[-1]
    assert asked["response_type"] == "ephemeral"
    pressed = press(slack, ZEPH, cafe, _button(asked), "pressed")
    assert await post(adapter, pressed, form=True) == 200
    done = slack.responses[-1]
    assert done["name"] == "pressed" and "forgotten you" in done["text"]
    assert done["response_type"] == "ephemeral" and done["replace_original"] is True
    assert held_anywhere(runtime, [ZEPH, "Zephyrine", PHRASE]) == []


async def test_a_mentioned_forget_me_answers_with_the_button_ephemerally(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    await _heard(runtime, adapter, slack, f"Isabella, {PHRASE}!")
    cafe = slack.channel_id(CAFE)
    mention = {"type": "app_mention", "channel": cafe, "user": ZEPH, "text": "<@U0BOT> forget-me"}
    await post(adapter, event_callback(mention))
    (asked,) = [e for e in slack.ephemerals if e["user"] == ZEPH]
    blocks = asked["blocks"]
    button = _button({"blocks": json.loads(blocks) if isinstance(blocks, str) else blocks})
    await post(adapter, press(slack, ZEPH, cafe, button, "pressed"), form=True)
    assert "forgotten you" in slack.responses[-1]["text"]
    assert not remembered(runtime, PHRASE)

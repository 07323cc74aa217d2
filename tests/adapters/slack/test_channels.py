"""Slack provisioning: one channel per location, found again or made again."""

from __future__ import annotations

from adapters.slack.adapter import SlackAdapter
from adapters.slack.text import channel_name
from bot.runtime.run import TownRuntime
from standins.slack.workspace import FakeSlack
from tests.adapters.slack.support import (
    CAFE,
    heard_by,
    links,
    make_adapter,
    message,
    occupied,
    post,
    pump,
    say_in_outbox,
)


async def test_provisioning_twice_creates_nothing_new(
    runtime: TownRuntime, slack: FakeSlack
) -> None:
    slack.add_channel("general", member=True)
    slack.add_channel("random")
    existing = slack.add_channel(CAFE)  # found by name, joined
    old = slack.add_channel("mini-mueller-home", archived=True)  # taken for good: a new name
    first = make_adapter(runtime, slack)
    await first.start()
    await first.stop()

    created = [c.params["name"] for c in slack.called("conversations.create")]
    assert sorted(created) == ["mini-mueller-home-2", "mini-rodriguez-home"]
    assert [c.params["channel"] for c in slack.called("conversations.join")] == [existing]
    assert len(slack.called("conversations.list")) > 1  # paged through
    stored = links(runtime)
    assert stored["Hobbs Cafe"] == existing
    assert stored["Mueller home"] == slack.channel_id("mini-mueller-home-2") != old
    assert stored["Rodriguez home"] == slack.channel_id("mini-rodriguez-home")
    purposes = {
        c.params["channel"]: c.params["purpose"] for c in slack.called("conversations.setPurpose")
    }
    assert set(purposes) == {stored["Mueller home"], stored["Rodriguez home"]}  # the new ones
    assert all("AI personas" in p and len(p) <= 250 for p in purposes.values())
    assert slack.channels[stored["Rodriguez home"]]["purpose"]["value"].startswith("Rodriguez home")
    assert "workspace Town Workspace, 3 location channels" in first.status_line()

    slack.calls.clear()
    second = make_adapter(runtime, slack)
    await second.start()
    await second.stop()
    assert slack.called("conversations.create") == []
    assert slack.called("conversations.join") == []
    assert links(runtime) == stored
    assert len(slack.channels) == 6


async def test_a_lost_channel_is_provisioned_again(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    area, old, here = await occupied(runtime, slack)
    name, speaker = channel_name("mini", area), sorted(here)[0]
    outbox = pump(runtime, adapter, [])

    slack.channels[old]["is_archived"] = True  # archived: a new channel, numbered
    slack.fail("conversations.setPurpose", error="missing_scope")  # (usable without one)
    say_in_outbox(runtime, area, speaker, "Anyone here?", "archived")
    await outbox.deliver_pending()
    [posted] = [m for m in slack.messages if m["text"] == "Anyone here?"]
    renamed = slack.channel_id(f"{name}-2")
    assert posted["channel"] == renamed == links(runtime)[area] != old
    await post(adapter, message(renamed, "found you"))
    assert heard_by(runtime, "found you") == here

    slack.channels[renamed]["is_member"] = False  # someone removed the bot: it joins again
    say_in_outbox(runtime, area, speaker, "Back again.", "kicked")
    await outbox.deliver_pending()
    assert [m["channel"] for m in slack.messages if m["text"] == "Back again."] == [renamed]

    del slack.channels[renamed]  # deleted: found by name no more, so made again
    say_in_outbox(runtime, area, speaker, "Rebuilt.", "deleted")
    await outbox.deliver_pending()
    [rebuilt] = [m for m in slack.messages if m["text"] == "Rebuilt."]
    assert rebuilt["channel"] == slack.channel_id(f"{name}-2") == links(runtime)[area] != renamed
    assert outbox.stats.retries == 0  # each repaired inside one send


async def test_channel_discovery_waits_out_tier_2_limits_and_reads_stored_ids_first(
    runtime: TownRuntime, slack: FakeSlack
) -> None:
    for n in range(6):
        slack.add_channel(f"other-{n}")
    for _ in range(5):  # a large workspace: the list is rate-limited page after page
        slack.fail("conversations.list", status=429, retry_after=20)
    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    first = make_adapter(runtime, slack)
    first.channels.sleep = no_wait
    await first.start()
    await first.stop()
    assert waits == [20.0] * 5 and len(links(runtime)) == 3

    listed = len(slack.called("conversations.list"))
    second = make_adapter(runtime, slack)
    await second.start()  # every location has a live stored channel: no listing at all
    await second.stop()
    assert len(slack.called("conversations.list")) == listed
    assert len(slack.called("conversations.info")) == 3

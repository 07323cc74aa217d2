"""A running town on the fake Slack follows a live ``town update`` made elsewhere: the new
place gets its channel, and the newcomer posts there under its own name."""

from __future__ import annotations

from pathlib import Path

from adapters.slack.adapter import SlackAdapter
from bot.runtime.run import TownRuntime
from standins.slack.workspace import FakeSlack
from tests.adapters.slack.support import links, pump
from tests.town.authoring.edits import FINN, QUAY, folder_with, without
from town.authoring.living import apply_update
from town.tick.engine import Engine


async def test_a_new_place_gets_a_channel_where_the_newcomer_posts(
    runtime: TownRuntime, slack: FakeSlack, adapter: SlackAdapter, tmp_path: Path
) -> None:
    engine = runtime.engine
    shell = Engine(runtime.store, engine.spec, engine.brain, engine.streams, runtime.town_id)
    folder = folder_with(tmp_path, town=QUAY, residents=FINN)
    await apply_update(shell, folder)
    assert await runtime.tick() is not None
    deliver = pump(runtime, adapter, [])
    await deliver.deliver_pending()
    assert links(runtime)["Harbour Quay"] == slack.channel_id("mini-harbour-quay")
    posted = slack.messages_in("mini-harbour-quay")
    assert any(m.get("username") == "Finn Reed" for m in posted), posted
    assert "mini-harbour-quay" in [c.params["name"] for c in slack.called("conversations.create")]

    without(folder, "Klaus Mueller")
    await apply_update(shell, folder)
    assert await runtime.tick() is not None
    await deliver.deliver_pending()
    assert any("Klaus Mueller has moved away" in m["text"] for m in slack.messages)

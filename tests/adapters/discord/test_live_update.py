"""A running town on the fake Discord follows a live ``town update`` made elsewhere: the new
place gets its channel and webhook, the newcomer posts there, and who moved away is said."""

from __future__ import annotations

from pathlib import Path

from adapters.discord.adapter import DiscordAdapter
from bot.runtime.run import TownRuntime
from standins.discord.server import FakeDiscord
from tests.adapters.discord.support import pump
from tests.town.authoring.edits import FINN, QUAY, folder_with, without
from town.authoring.living import apply_update
from town.tick.engine import Engine


async def test_a_new_place_gets_a_channel_where_the_newcomer_posts(
    runtime: TownRuntime, fake: FakeDiscord, adapter: DiscordAdapter, tmp_path: Path
) -> None:
    engine = runtime.engine
    shell = Engine(runtime.store, engine.spec, engine.brain, engine.streams, runtime.town_id)
    folder = folder_with(tmp_path, town=QUAY, residents=FINN)
    await apply_update(shell, folder)  # `bottown town update`, beside the running town
    assert await runtime.tick() is not None
    assert "Harbour Quay" in runtime.areas() and "Finn Reed" in engine.specs()
    deliver = pump(runtime, adapter)
    deliver.recover()
    await deliver.deliver_pending()
    channel = fake.channel_named("harbour-quay")
    assert channel["parent_id"] == fake.channel_named(runtime.town_name, type_=4)["id"]
    posted = fake.webhook_messages(channel["id"])
    assert any(m["author"]["username"] == "Finn Reed" for m in posted), posted
    assert any("Finn Reed moves in" in m["content"] for m in posted)

    without(folder, "Klaus Mueller")
    await apply_update(shell, folder)
    assert await runtime.tick() is not None
    await deliver.deliver_pending()
    said = [m["content"] for m in fake.messages]
    assert any("Klaus Mueller has moved away" in text for text in said)
    assert "Klaus Mueller" not in engine.specs()

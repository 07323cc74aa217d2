"""The web town follows a live ``town update``: the new place is on the map and in the channel
list, the newcomer on the map and in the new place's channel."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from adapters.core.delivery import OutboxPump
from adapters.web.server import WebAdapter
from bot.runtime.run import TownRuntime
from tests.town.authoring.edits import FINN, QUAY, folder_with, without
from town.authoring.living import apply_update
from town.tick.engine import Engine


async def test_the_map_and_channels_follow_an_update(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    engine = runtime.engine
    shell = Engine(runtime.store, engine.spec, engine.brain, engine.streams, runtime.town_id)
    folder = folder_with(tmp_path, town=QUAY, residents=FINN)
    await apply_update(shell, folder)
    assert await runtime.tick() is not None
    await OutboxPump(runtime.store, runtime.town_id, web).deliver_pending()
    town = await (await http.get(web.url + "/api/town")).json()
    assert "Harbour Quay" in town["areas"]
    seen = await (await http.get(web.url + "/api/map")).json()
    assert "Harbour Quay" in [p["name"] for p in seen["places"]]
    assert "Finn Reed" in [r["name"] for r in seen["residents"]]
    history = await (
        await http.get(web.url + "/api/history", params={"area": "Harbour Quay"})
    ).json()
    assert any(m["author"] == "Finn Reed" for m in history["messages"]), history

    without(folder, "Klaus Mueller")
    await apply_update(shell, folder)
    assert await runtime.tick() is not None
    seen = await (await http.get(web.url + "/api/map")).json()
    assert "Klaus Mueller" not in [r["name"] for r in seen["residents"]]
    card = await http.get(web.url + "/api/resident", params={"name": "Klaus Mueller"})
    assert card.status == 404

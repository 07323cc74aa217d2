"""The web API's map, resident cards, typing events and the town's replay (aiohttp's client)."""

from __future__ import annotations

import json
from datetime import timedelta

import aiohttp

from adapters.web.server import WebAdapter
from bot.runtime.run import TownRuntime
from tests.adapters.web.support import HOBBS, events, someone_awake_at
from tests.factories import resident
from town.store.models import Memory
from town.views.places import whereabouts


async def test_the_map_shows_every_area_and_each_resident_where_the_store_says(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession
) -> None:
    await someone_awake_at(runtime, HOBBS)
    seen = await (await http.get(web.url + "/api/map")).json()
    assert [p["name"] for p in seen["places"]] == runtime.areas()
    boxes = {(p["x"], p["y"]) for p in seen["places"]}
    assert len(boxes) == len(seen["places"]), "no two areas on one spot"
    stored = await whereabouts(runtime.engine)
    expected = {
        (name, area, awake) for area, here in stored.by_area.items() for name, _, awake in here
    }
    assert {(r["name"], r["area"], r["awake"]) for r in seen["residents"]} == expected
    isabella = next(r for r in seen["residents"] if r["name"] == "Isabella Rodriguez")
    assert isabella["avatar"] == runtime.engine.spec.resident("Isabella Rodriguez").avatar_emoji


async def test_a_card_shows_plan_memories_and_people_but_no_private_memory(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession
) -> None:
    await someone_awake_at(runtime, HOBBS)
    row = resident(runtime.store, "Isabella Rodriguez")
    with runtime.store.session() as s:
        clock = runtime.engine.town(s).clock
        for text, private in (("the visitor's secret is 1234", True), ("the sky is grey", False)):
            later = clock + timedelta(minutes=1)
            s.add(Memory(resident_id=row.id, kind="observation", text=text, created=later,
                         last_access=later, importance=5, private=private))  # fmt: skip
        s.commit()
    reply = await http.get(web.url + "/api/resident", params={"name": "isabella"})
    assert reply.status == 200
    card = await reply.json()
    assert card["name"] == "Isabella Rodriguez" and card["summary"]
    assert card["plan"] and all(line["description"] for line in card["plan"])
    texts = [m["text"] for m in card["memories"]]
    assert "the sky is grey" in texts
    assert "secret" not in json.dumps(card), "a private memory never reaches the page"
    assert any(p["name"] == "Klaus Mueller" and p["how"] for p in card["people"])

    unknown = await http.get(web.url + "/api/resident", params={"name": "Nobody"})
    assert unknown.status == 404 and "no resident named" in (await unknown.json())["error"]
    empty = await http.get(web.url + "/api/resident", params={"name": " "})
    assert empty.status == 400


async def test_typing_is_an_event_with_the_residents_own_emoji(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession
) -> None:
    stream = await events(http, web.url)
    await web.typing(HOBBS, "Klaus Mueller")
    web.feed.add(HOBBS, "Klaus Mueller", "Hello there")
    message = await stream.next()
    assert message["text"] == "Hello there"
    avatar = runtime.engine.spec.resident("Klaus Mueller").avatar_emoji
    assert stream.typing == [{"area": HOBBS, "author": "Klaus Mueller", "emoji": avatar}]
    again = await events(http, web.url, **{"Last-Event-ID": f"{stream.epoch}.0"})
    assert (await again.next())["text"] == "Hello there" and again.typing == []  # not kept


async def test_the_towns_replay_is_served_when_a_run_recorded_one(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession
) -> None:
    missing = await http.get(web.url + "/api/replay")
    assert missing.status == 404 and "simulate" in (await missing.json())["error"]
    replays = runtime.settings.data_dir / "replays"
    replays.mkdir(parents=True)
    line = {"at": "2023-02-13T07:30:00+00:00", "kind": "moved", "channel": "Rodriguez home",
            "resident": "Isabella Rodriguez", "text": "Isabella Rodriguez left for Hobbs Cafe",
            "to": "Hobbs Cafe: counter"}  # fmt: skip
    (replays / "mini.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    web.views.data_dir = runtime.settings.data_dir
    assert (await (await http.get(web.url + "/api/town")).json())["replay"] is True
    replay = await (await http.get(web.url + "/api/replay")).json()
    (event,) = replay["events"]
    assert (event["area"], event["clock"]) == (HOBBS, "07:30")  # where the move leaves her
    assert event["shown"]["channel"] == "Rodriguez home"  # told where she left
    assert replay["avatars"]["Isabella Rodriguez"]
    page = await http.get(web.url + "/replay")
    assert page.status == 200 and "/static/replay.js" in await page.text()

"""Members decide what the town keeps of them, on the web page: forget-me and mute."""

from __future__ import annotations

import json

import aiohttp

from adapters.core.delivery import OutboxPump
from adapters.core.ports import Caller
from adapters.web.server import WebAdapter
from bot.runtime.run import TownRuntime
from tests.adapters.consent_support import PHRASE, held_anywhere, knows, remembered, write_replay
from tests.adapters.web.support import HOBBS, someone_awake_at
from tests.factories import open_runtime

ZEPH = "v-zephyrine-7731"


def _said(text: str) -> dict[str, str]:
    return {"area": HOBBS, "name": "Zephyrine Quill", "visitor_id": ZEPH, "text": text}


def _line(text: str) -> dict[str, str]:
    return {"line": text, "area": HOBBS, "name": "Zephyrine Quill", "visitor_id": ZEPH}


async def test_forget_me_on_the_web_leaves_nothing_of_the_member(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession
) -> None:
    resident = await someone_awake_at(runtime, HOBBS)
    first = resident.split()[0]
    said = await http.post(web.url + "/api/say", json=_said(f"{first}, {PHRASE}!"))
    assert said.status == 200
    await OutboxPump(runtime.store, runtime.town_id, web).deliver_pending()
    await runtime.opened.engine.tick()
    assert remembered(runtime, PHRASE)
    write_replay(runtime)
    needles = [ZEPH, "Zephyrine", PHRASE]
    assert held_anywhere(runtime, needles)

    asked = await (await http.post(web.url + "/api/command", json=_line("forget-me"))).json()
    assert asked["private"] and "forget-me confirm" in asked["text"]
    done = await (await http.post(web.url + "/api/command", json=_line("forget-me confirm"))).json()
    assert done["ok"] and "forgotten you" in done["text"]
    assert held_anywhere(runtime, needles) == []
    page = await (await http.get(web.url + "/api/history", params={"area": HOBBS})).json()
    assert "Zephyrine" not in json.dumps(page) and PHRASE not in json.dumps(page)
    assert not await knows(runtime, first, "Zephyrine")


async def test_a_muted_member_is_neither_heard_nor_answered_on_the_web(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession
) -> None:
    resident = await someone_awake_at(runtime, HOBBS)
    muted = await (await http.post(web.url + "/api/command", json=_line("mute"))).json()
    assert muted["text"].startswith("Muted")
    pump = OutboxPump(runtime.store, runtime.town_id, web)
    await pump.deliver_pending()
    before = web.feed.since(0)
    await http.post(web.url + "/api/say", json=_said(f"{resident}, zebra umbrellas!"))
    look = await (await http.post(web.url + "/api/command", json=_line("look"))).json()
    assert look["ok"]  # commands still work
    await runtime.opened.engine.tick()
    await pump.deliver_pending()
    assert not remembered(runtime, "zebra umbrellas") and not remembered(runtime, "Zephyrine")
    answers = [m for m in web.feed.since(0)[len(before) :] if m.author == resident]
    assert not [m for m in answers if "Zephyrine" in m.text]
    # their words are shown to nobody: not on the feed, not in the channel's history
    assert not [m for m in web.feed.since(0) if "zebra umbrellas" in m.text]
    page = await (await http.get(web.url + "/api/history", params={"area": HOBBS})).json()
    assert "zebra umbrellas" not in json.dumps(page)


async def test_a_forget_in_another_process_leaves_the_running_page_at_once(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession
) -> None:
    """``bottown forget`` in a second process: this town's store, its own engine and caches."""
    resident = await someone_awake_at(runtime, HOBBS)
    first = resident.split()[0]
    said = await http.post(web.url + "/api/say", json=_said(f"{first}, {PHRASE}!"))
    assert said.status == 200
    await OutboxPump(runtime.store, runtime.town_id, web).deliver_pending()
    await runtime.opened.engine.tick()
    page = json.dumps(
        await (await http.get(web.url + "/api/history", params={"area": HOBBS})).json()
    )
    assert "Zephyrine" in page and PHRASE in page
    epoch = web.feed.epoch

    other = await open_runtime(runtime.settings)
    try:
        caller = Caller("cli", "shell", "shell", True)
        done = await other.commands.consent.forget_member(caller, ["Zephyrine", "Quill"])
        assert "has forgotten" in done.text
    finally:
        other.opened.services.close()

    page = json.dumps(
        await (await http.get(web.url + "/api/history", params={"area": HOBBS})).json()
    )
    assert "Zephyrine" not in page and PHRASE not in page
    assert web.feed.epoch != epoch  # open pages reload their channel
    assert not await knows(runtime, first, "Zephyrine")  # nor does this process recall them

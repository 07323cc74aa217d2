"""The web page's 👍/👎 on a resident's message: stored against the message (an answer to a
visitor here), taken back, bad input refused with a clear error, counted by ``eval live``."""

from __future__ import annotations

from typing import Any

import aiohttp
from sqlmodel import select

from adapters.core.delivery import OutboxPump
from adapters.web.server import WebAdapter
from bot.runtime.run import TownRuntime
from tests.adapters.web.support import HOBBS, events, said, someone_awake_at
from town.experiments.live import live_figures
from town.features.ratings.moods import DEFAULT_MOODS
from town.outbox.events import TownEvent, write_outbox
from town.store.models import Reaction, Town


def stored(runtime: TownRuntime) -> list[tuple[str, str, str]]:
    with runtime.store.session() as s:
        rows = s.exec(select(Reaction).order_by(Reaction.id)).all()  # type: ignore[arg-type]
        return [(r.resident, r.emoji, r.task) for r in rows]


async def test_a_visitor_rates_an_answer_up_and_another_down(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession
) -> None:
    resident = await someone_awake_at(runtime, HOBBS)
    pump = OutboxPump(runtime.store, runtime.town_id, web)
    await pump.deliver_pending()
    stream = await events(http, web.url)
    words = {"area": HOBBS, "name": "Alice", "visitor_id": "v-alice"}
    await http.post(web.url + "/api/say", json={**words, "text": f"{resident}, hello!"})
    await pump.deliver_pending()
    answer = await stream.until(said(resident))

    async def react(visitor: str, emoji: str, **extra: Any) -> tuple[int, Any]:
        body = {"epoch": web.feed.epoch, "id": answer["id"], "visitor_id": visitor}
        async with http.post(
            web.url + "/api/react", json={**body, "name": visitor, "emoji": emoji, **extra}
        ) as response:
            return response.status, await response.json()

    assert await react("v-alice", "👍") == (200, {"ok": True, "kept": True})
    assert await react("v-alice", "👍") == (200, {"ok": True, "kept": False})  # once
    assert (await react("v-bob", "👎"))[0] == 200
    assert (await react("v-carol", "👎"))[0] == 200
    assert stored(runtime) == [
        (resident, "👍", "visitor"),
        (resident, "👎", "visitor"),
        (resident, "👎", "visitor"),
    ]
    assert await react("v-carol", "👎", removed=True) == (200, {"ok": True, "kept": True})
    with runtime.store.session() as s:
        figures = live_figures(s, runtime.town_id, DEFAULT_MOODS, by="task", since=None)
    [answers] = [g for g in figures.groups if g.name == "visitor"]
    assert (answers.shown, answers.reacted, answers.rated_up, answers.rated_down) == (1, 1, 0, 0)
    assert answers.reactions == {"up": 1, "down": 1, "other": 0}  # a tie rates it neither way

    status, error = await react("v-bob", "🤡")
    assert status == 400 and "👍 👎" in error["error"]
    assert (await react("v-bob", "👍", epoch="old"))[0] == 409
    assert (await react("v-bob", "👍", id="7"))[0] == 400
    assert (await react("v-bob", "👍", removed="yes"))[0] == 400
    assert (await react("no spaces allowed", "👍"))[0] == 400
    assert len(stored(runtime)) == 2  # nothing kept from bad input


async def test_a_message_from_before_a_restart_can_still_be_rated(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession
) -> None:
    resident = await someone_awake_at(runtime, HOBBS)
    with runtime.store.session() as s:
        clock = s.exec(select(Town.clock)).one()
        event = TownEvent("said", HOBBS, clock, resident, "Fresh bread today.", {"emoji": "🍞"})
        write_outbox(s, runtime.town_id, "before-restart", [event])
    await OutboxPump(runtime.store, runtime.town_id, web).deliver_pending()
    await web.stop()
    await web.start()  # a new run of the page: the history numbered anew
    async with http.get(web.url + "/api/history", params={"area": HOBBS}) as response:
        history = await response.json()
    said = [m for m in history["messages"] if m["author"] == resident]
    assert said and history["epoch"] == web.feed.epoch
    body = {"epoch": web.feed.epoch, "id": said[-1]["id"], "visitor_id": "v-late", "emoji": "👍"}
    async with http.post(web.url + "/api/react", json=body) as response:
        assert await response.json() == {"ok": True, "kept": True}
    assert stored(runtime) == [(resident, "👍", "conversation")]

"""A web channel's history: kept in the store across a restart, in the order it was written."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import aiohttp

from adapters.core.delivery import OutboxPump
from adapters.web.history import oldest_first
from adapters.web.server import WebAdapter
from bot.runtime.run import TownRuntime
from tests.adapters.web.support import HOBBS, said, someone_awake_at


async def test_history_survives_a_restart(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession
) -> None:
    resident = await someone_awake_at(runtime, HOBBS)
    pump = OutboxPump(runtime.store, runtime.town_id, web)
    await pump.deliver_pending()  # the morning so far (perhaps as a digest)
    await http.post(
        web.url + "/api/say",
        json={"area": HOBBS, "name": "Bo", "visitor_id": "v-bo", "text": "Hello, anyone cooking?"},
    )
    assert await pump.deliver_pending() > 0
    before = await (await http.get(web.url + "/api/history", params={"area": HOBBS})).json()
    await web.stop()

    again = WebAdapter(runtime, runtime.store, runtime.town_id, port=0)
    await again.start()
    try:
        url = f"{again.url}/api/history"
        after = await (await http.get(url, params={"area": HOBBS})).json()
        home = await (await http.get(url, params={"area": "Mueller home"})).json()
    finally:
        await again.stop()
    messages = after["messages"]
    assert any(said(resident)(m) for m in messages), "the resident's answer is still there"
    assert any(m["kind"] == "town" for m in home["messages"]), "narration too"
    shown = [
        (m["author"], m["text"], m["kind"])
        for m in before["messages"]
        if not m["text"].startswith("While the channel caught up")
    ]  # a digest is stored as the events it stood for
    assert ("Bo", "Hello, anyone cooking?", "visitor") in shown, "the visitor's own words too"
    assert [(m["author"], m["text"], m["kind"]) for m in messages][-len(shown) :] == shown
    assert all(re.fullmatch(r"\d\d:\d\d", m["clock"]) for m in messages)
    assert not any("plan for" in m["text"] for m in messages), "plans are never shown"


def test_history_keeps_the_order_things_were_written_in_when_the_clock_ties() -> None:
    """A coarse clock gives a tick's events one timestamp: they stay in the order written, and
    never fall into the order of their authors' names."""
    at, later = datetime(2026, 2, 13, 9, tzinfo=UTC), datetime(2026, 2, 13, 9, 1, tzinfo=UTC)
    stored = [
        (at, "", "Tom Moreno arrived", "", "town", "09:00", ""),
        (at, "", "Abigail Chen arrived", "", "town", "09:00", ""),
        (later, "Isabella", "Welcome!", "", "resident", "09:01", ""),
    ]
    visitors = [(at, "Bo", "Hello", "", "visitor", "09:00", "web")]
    assert [m[2] for m in oldest_first(stored, visitors)] == [
        "Tom Moreno arrived",
        "Abigail Chen arrived",
        "Hello",
        "Welcome!",
    ]

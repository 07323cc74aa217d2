"""The live feed: a page that reconnects catches up on what it missed."""

from __future__ import annotations

import aiohttp
import pytest

from adapters.core.ports import Outgoing
from adapters.web.server import WebAdapter
from tests.adapters.web.support import HOBBS, events


async def test_a_reconnecting_page_catches_up(web: WebAdapter, http: aiohttp.ClientSession) -> None:
    run = web.feed.epoch
    ids = [await web.send(Outgoing(f"k{n}", HOBBS, "", f"news {n}")) for n in range(3)]
    assert ids == [f"web:{run}.1", f"web:{run}.2", f"web:{run}.3"]
    stream = await events(http, web.url, **{"Last-Event-ID": f"{run}.1"})
    assert [(await stream.next())["text"] for _ in range(2)] == ["news 1", "news 2"]
    assert stream.epoch == run
    # a page from before a restart: the numbers are another run's, so nothing is replayed
    stale = await events(http, web.url, **{"Last-Event-ID": "0123456789ab.1"})
    await web.send(Outgoing("k9", "Mueller home", "Klaus Mueller", "hi", "📚"))
    assert (await stale.next())["text"] == "hi" and stale.epoch == run
    live = await stream.next()
    assert (live["area"], live["author"], live["emoji"], live["kind"]) == (
        "Mueller home",
        "Klaus Mueller",
        "📚",
        "resident",
    )
    await web.stop()  # an open page's stream ends with the server
    with pytest.raises(AssertionError, match="ended"):
        await stream.next()

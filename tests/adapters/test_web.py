"""The local web adapter: its HTTP API against the running server (aiohttp's client on
loopback), and the page in headless Chromium against ``bottown run``'s ``serve``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from sqlmodel import col, select

from adapters.core.base import Outgoing
from adapters.core.delivery import OutboxPump
from adapters.web.server import QUEUE, Feed, WebAdapter, oldest_first
from bot.runtime.run import TownRuntime
from tests.browser import chromium_page
from tests.factories import MINITOWN
from town.inputs import whereabouts
from town.store.models import Delivery, Memory, Resident, Visitor

if TYPE_CHECKING:
    pass

HOBBS = "Hobbs Cafe"


# -- helpers ---------------------------------------------------------------------------------


async def someone_awake_at(runtime: TownRuntime, area: str, max_ticks: int = 18) -> str:
    """Tick the town until a resident is awake in ``area``; that resident's full name."""
    for _ in range(max_ticks):
        seen = await whereabouts(runtime.opened.engine)
        awake = [name for name, _, up in seen.by_area.get(area, []) if up]
        if awake:
            return awake[0]
        await runtime.opened.engine.tick()
    raise AssertionError(f"nobody woke up in {area} after {max_ticks} ticks")


class EventStream:
    """A reader of one server-sent events response."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.epoch = ""  # from the stream's first event, "hello"

    async def next(self, wait_s: float = 30.0) -> dict[str, Any]:
        data: dict[str, Any] | None = None
        event_id = kind = ""
        while True:
            line = await asyncio.wait_for(self.response.content.readline(), wait_s)
            if not line:
                raise AssertionError("the event stream ended")
            text = line.decode().rstrip("\n")
            if text.startswith("id: "):
                event_id = text[4:]
            elif text.startswith("event: "):
                kind = text[7:]
            elif text.startswith("data: "):
                data = json.loads(text[6:])
            elif text == "" and kind == "hello" and data is not None:
                self.epoch, data, kind = data["epoch"], None, ""
            elif text == "" and data is not None:
                assert event_id == f"{self.epoch}.{data['id']}"
                return data

    async def until(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            message = await self.next()
            if wanted(message):
                return message


@pytest.fixture
async def web(runtime: TownRuntime) -> AsyncIterator[WebAdapter]:
    adapter = WebAdapter(runtime, runtime.store, runtime.town_id, host="127.0.0.1", port=0)
    await adapter.start()
    runtime.adapters.append(adapter)
    yield adapter
    await adapter.stop()


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def events(http: aiohttp.ClientSession, url: str, **headers: str) -> EventStream:
    response = await http.get(f"{url}/api/events", headers=headers)
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    return EventStream(response)


def said(author: str) -> Callable[[dict[str, Any]], bool]:
    return lambda m: m["author"] == author and m["kind"] == "resident"


# -- the API -----------------------------------------------------------------------------------


async def test_page_town_and_status(web: WebAdapter, http: aiohttp.ClientSession) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", web.url) and not web.url.endswith(":0")
    assert web.status_line() == f"Web: {web.url}"
    page = await http.get(web.url + "/")
    html = await page.text()
    assert page.status == 200 and page.content_type == "text/html"
    assert "/static/app.js" in html and "/static/style.css" in html
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    assert not re.search(r"(src|href)=\"(https?:)?//", html), "everything is served locally"
    for path, kind in (("/static/app.js", "text/javascript"), ("/static/style.css", "text/css")):
        asset = await http.get(web.url + path)
        assert asset.status == 200 and asset.content_type == kind
        assert "http://" not in await asset.text() and "https://" not in await asset.text()
    town = await (await http.get(web.url + "/api/town")).json()
    assert town == {
        "name": "mini",
        "areas": ["Hobbs Cafe", "Rodriguez home", "Mueller home"],
        "admin": True,
        "max_text": 10_000,
        "brain": {"label": "offline brain (deterministic, no LLM)", "offline": True},
    }
    now = await (await http.get(web.url + "/api/now")).json()
    assert now["time"].startswith("It is Monday, February 13, 06:50")
    assert now["brain"] == town["brain"]
    assert "Rodriguez home: Isabella Rodriguez (asleep)" in now["where"]
    assert (await http.get(web.url + "/static/../web.py")).status == 404


async def test_a_visitor_is_answered_live_through_the_outbox(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession
) -> None:
    resident = await someone_awake_at(runtime, HOBBS)
    first = resident.split()[0]
    pump = OutboxPump(runtime.store, runtime.town_id, web)
    await pump.deliver_pending()  # the morning so far
    stream = await events(http, web.url)
    said_text = f"{first}, what are you reading? <b>hi</b>"
    reply = await http.post(
        web.url + "/api/say",
        json={"area": HOBBS, "name": "Alice", "visitor_id": "v-alice", "text": said_text},
    )
    assert reply.status == 200 and (await reply.json())["ok"] is True
    echo = await stream.next()
    assert (echo["author"], echo["kind"], echo["text"]) == ("Alice", "visitor", said_text)
    assert await pump.deliver_pending() >= 1
    answer = await stream.until(said(resident))
    assert answer["area"] == HOBBS and answer["text"] and answer["id"] > echo["id"]
    assert re.fullmatch(r"\d\d:\d\d", answer["clock"])
    with runtime.store.session() as s:
        visitor = s.exec(select(Visitor).where(Visitor.platform_user_id == "v-alice")).one()
        assert (visitor.platform, visitor.display_name) == ("web", "Alice")
        heard = s.exec(
            select(Memory.text)
            .join(Resident, col(Resident.id) == col(Memory.resident_id))
            .where(Resident.name == resident, col(Memory.text).contains("Alice said"))
        ).all()
        assert heard, "the resident remembers the visitor's words"
        ids = s.exec(select(Delivery.message_id).where(Delivery.status == "sent")).all()
        assert f"web:{web.feed.epoch}.{answer['id']}" in ids


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


async def test_commands_private_public_and_admin(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession
) -> None:
    def line(text: str, visitor: str = "v-alice") -> dict[str, str]:
        return {"line": text, "area": HOBBS, "name": "Alice", "visitor_id": visitor}

    stream = await events(http, web.url)
    look = await (await http.post(web.url + "/api/command", json=line("/look"))).json()
    assert look["private"] and look["ok"] and not look["published"]
    assert look["text"].startswith("Hobbs Cafe: a small cafe")
    unknown = await (await http.post(web.url + "/api/command", json=line("dance"))).json()
    assert not unknown["ok"] and "no command 'dance'" in unknown["text"]
    joined = await http.post(web.url + "/api/command", json=line("join Alice reporter"))
    body = await joined.json()
    assert body["published"] and body["text"].startswith("Welcome, Alice, reporter")
    public = await stream.next()
    assert (public["kind"], public["area"], public["text"]) == ("town", HOBBS, body["text"])
    # bound to loopback, whoever reaches the page owns the town
    paused = await (await http.post(web.url + "/api/command", json=line("pause"))).json()
    assert paused["ok"], paused
    await http.post(web.url + "/api/command", json=line("resume"))

    # bound elsewhere, only the settings' allow-list ("web:root" in the fixture) is admin
    shared = WebAdapter(runtime, runtime.store, runtime.town_id, host="0.0.0.0", port=0)
    assert not shared.owner_is_local
    async with TestServer(shared.app(), host="127.0.0.1") as server:
        base = str(server.make_url("/api/command"))
        refused = await (await http.post(base, json=line("pause", "stranger"))).json()
        assert not refused["ok"] and refused["text"].startswith("Only admins")
        allowed = await (await http.post(base, json=line("pause", "root"))).json()
        assert allowed["ok"], allowed


async def test_bad_input_gets_clear_errors_never_a_500(
    web: WebAdapter, http: aiohttp.ClientSession
) -> None:
    good = {"area": HOBBS, "name": "Alice", "visitor_id": "v1", "text": "hello"}
    say, command = web.url + "/api/say", web.url + "/api/command"
    port = web.url.rsplit(":", 1)[1]
    cases: list[tuple[str, dict[str, Any], int, str]] = [
        (say, {"json": good | {"area": "Atlantis"}}, 404, "no channel 'Atlantis'"),
        (say, {"json": good | {"text": "   "}}, 400, "text is empty"),
        (say, {"json": good | {"text": "x" * 10_001}}, 413, "at most 10000"),
        (say, {"json": good | {"text": 5}}, 400, "text must be a string"),
        (say, {"json": good | {"name": ""}}, 400, "name is empty"),
        (say, {"json": good | {"name": "n" * 81}}, 400, "at most 80"),
        (say, {"json": good | {"visitor_id": "a b"}}, 400, "visitor_id"),
        (say, {"json": {k: v for k, v in good.items() if k != "area"}}, 400, "which channel"),
        (say, {"json": ["hello"]}, 400, "JSON object"),
        (say, {"data": "{not json", "headers": {"Content-Type": "application/json"}}, 400, "JSON"),
        (say, {"data": "text=hi", "headers": {"Content-Type": "text/plain"}}, 415, "JSON"),
        (say, {"data": b"x" * 300_000, "headers": {"Content-Type": "application/json"}}, 413, ""),
        (say, {"json": good, "headers": {"Origin": "http://evil.example"}}, 403, "evil.example"),
        (say, {"json": good, "headers": {"Host": f"evil.example:{port}"}}, 403, "127.0.0.1"),
        (command, {"json": {"line": "", "visitor_id": "v1"}}, 400, "line is empty"),
        (command, {"json": {"line": "look", "visitor_id": "v1", "area": "Nowhere"}}, 404, ""),
    ]
    for url, kwargs, status, message in cases:
        response = await http.post(url, **kwargs)
        assert response.status == status, (kwargs, await response.text())
        assert message in (await response.json())["error"], kwargs
    for params, status in (({"area": "Nowhere"}, 404), ({"area": HOBBS, "limit": "x"}, 400)):
        response = await http.get(web.url + "/api/history", params=params)
        assert response.status == status and "error" in await response.json()
    # the longest message allowed, from the page's own origin, is taken (the town truncates it)
    fine = await http.post(say, json=good | {"text": "y" * 10_000}, headers={"Origin": web.url})
    assert fine.status == 200


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


def test_a_channel_keeps_its_newest_and_a_stuck_page_is_dropped() -> None:
    feed = Feed(keep=5)
    stuck = feed.listen()
    for n in range(QUEUE + 1):
        feed.add(HOBBS, "", f"news {n}")
    assert [m.text for m in feed.recent(HOBBS, 100)] == [f"news {n}" for n in range(996, 1001)]
    assert stuck.queue.get_nowait() is None and stuck.queue.empty()  # told to go; it reconnects
    feed.add(HOBBS, "", "later")
    assert stuck.queue.empty()


# -- the page in a browser ------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def running_town(tmp_path: Path) -> AsyncIterator[TownRuntime]:
    """``bottown run`` on the web, as ``serve`` runs it; ticks only when the test ticks."""
    from bot.runtime.run import serve
    from bot.runtime.settings import load_settings
    from town.memory.vectors import ChromaIndex

    ChromaIndex.release_all()
    settings = load_settings(
        data_dir=tmp_path / "data",
        embedder="hash",
        brain="offline",
        tick_seconds=3600,
        web_host="127.0.0.1",
        web_port=0,
    )
    ready: asyncio.Future[TownRuntime] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve(settings, ["web"], town="mini", persona=str(MINITOWN), ready=ready.set_result)
    )
    try:
        first: list[asyncio.Future[Any]] = [task, ready]
        done, _ = await asyncio.wait(first, timeout=30, return_when="FIRST_COMPLETED")
        if task in done:
            task.result()  # serve ended early: raise its error
        yield await ready
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_visitor_in_the_browser_sees_a_resident_answer(tmp_path: Path) -> None:
    from playwright.async_api import expect

    async with running_town(tmp_path) as runtime, chromium_page() as browser:
        (adapter,) = runtime.adapters
        assert isinstance(adapter, WebAdapter)
        resident = await someone_awake_at(runtime, HOBBS)
        runtime.wake.set()  # deliver the morning so far
        page = browser.page
        await page.goto(adapter.url)
        await expect(page.locator("#connection")).to_have_text("live")
        cafe = page.locator(f"#channels button[data-area='{HOBBS}']")
        await expect(cafe).to_contain_text(resident)  # who is where
        await expect(page.locator("#clock")).to_contain_text("It is Monday")
        brain = page.locator("#brain")  # the offline brain is labelled as such
        await expect(brain).to_have_text("offline brain (deterministic, no LLM)")
        await expect(brain).to_have_attribute("data-offline", "true")
        await cafe.click()
        await expect(page.locator("#channel-title")).to_have_text(HOBBS)
        await expect(page.locator("#feed .msg.town").first).to_be_visible()  # history

        await page.fill("#name", "Alice")
        words = f"{resident.split()[0]}, what are you up to? <img src=x onerror=alert(1)>"
        await page.fill("#text", words)
        await page.press("#text", "Enter")
        mine = page.locator("#feed .msg.visitor", has_text="what are you up to")
        await expect(mine).to_have_count(1)
        await expect(mine.locator(".text")).to_have_text(words)  # markup stays text
        answer = page.locator(f"#feed .msg.visitor ~ .msg.resident[data-author='{resident}']")
        await expect(answer.first).to_be_visible()
        await expect(answer.first.locator(".text")).not_to_be_empty()
        assert await page.locator("#feed img").count() == 0

        await page.fill("#text", "/look")
        await page.press("#text", "Enter")
        reply = page.locator("#feed .msg.reply")
        await expect(reply).to_contain_text("Hobbs Cafe: a small cafe")
        await expect(reply).to_contain_text("only you see this")
        await page.screenshot(path="/tmp/web.png")

        visitor_id = await page.evaluate("localStorage.getItem('bottown.visitor')")
        assert re.fullmatch(r"[0-9a-f]{32}", visitor_id)
        await page.reload()  # the name and the channel are remembered
        await expect(page.locator("#name")).to_have_value("Alice")
        await expect(page.locator("#channel-title")).to_have_text(HOBBS)
        said_here = page.locator(f"#feed .msg.resident[data-author='{resident}']")
        await expect(said_here).not_to_have_count(0)
        assert not browser.errors and not browser.console, (browser.errors, browser.console)
        with runtime.store.session() as s:
            visitor = s.exec(select(Visitor).where(Visitor.platform_user_id == visitor_id)).one()
            assert (visitor.platform, visitor.display_name) == ("web", "Alice")


async def test_an_open_page_follows_a_restart_of_the_server(runtime: TownRuntime) -> None:
    from playwright.async_api import expect

    async with chromium_page() as browser:
        first = WebAdapter(runtime, runtime.store, runtime.town_id, port=0)
        await first.start()
        port = int(first.url.rsplit(":", 1)[1])
        page = browser.page
        await page.goto(f"{first.url}/#{quote(HOBBS)}")
        await expect(page.locator("#connection")).to_have_text("live")
        for n in range(5):
            await first.send(Outgoing(f"old{n}", HOBBS, "", f"before the restart {n}"))
        await expect(page.locator("#feed .msg.town")).to_have_count(5)
        await first.stop()
        await expect(page.locator("#connection")).to_have_text("reconnecting…")

        second = WebAdapter(runtime, runtime.store, runtime.town_id, port=port)
        await second.start()
        try:
            await expect(page.locator("#connection")).to_have_text("live")
            # its ids begin again at 1: the page must not take it for one it has seen
            await second.send(Outgoing("new1", HOBBS, "Klaus Mueller", "after the restart", "📚"))
            await expect(page.locator("#feed .msg.resident")).to_have_text(
                re.compile("after the restart")
            )
            # what only the old run held (never delivered through the store) is gone
            await expect(page.locator("#feed .msg.town")).to_have_count(0)
        finally:
            await second.stop()
        assert not browser.errors, browser.errors


def test_history_keeps_the_order_things_were_written_in_when_the_clock_ties() -> None:
    """A coarse clock gives a tick's events one timestamp: they stay in the order written, and
    never fall into the order of their authors' names."""
    at, later = datetime(2026, 2, 13, 9, tzinfo=UTC), datetime(2026, 2, 13, 9, 1, tzinfo=UTC)
    stored = [
        (at, "", "Tom Moreno arrived", "", "town", "09:00"),
        (at, "", "Abigail Chen arrived", "", "town", "09:00"),
        (later, "Isabella", "Welcome!", "", "resident", "09:01"),
    ]
    visitors = [(at, "Bo", "Hello", "", "visitor", "09:00")]
    assert [m[2] for m in oldest_first(stored, visitors)] == [
        "Tom Moreno arrived",
        "Abigail Chen arrived",
        "Hello",
        "Welcome!",
    ]

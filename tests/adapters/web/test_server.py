"""The web adapter's HTTP API against the running server (aiohttp's client on loopback)."""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from sqlmodel import col, select

from adapters.core.delivery import OutboxPump
from adapters.web.pages import SCRIPTS
from adapters.web.server import WebAdapter
from bot.runtime.run import TownRuntime
from tests.adapters.web.support import HOBBS, events, said, someone_awake_at
from town.store.models import Delivery, Memory, Resident, Visitor


async def test_page_town_and_status(web: WebAdapter, http: aiohttp.ClientSession) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", web.url) and not web.url.endswith(":0")
    assert web.status_line() == f"Web: {web.url}"
    page = await http.get(web.url + "/")
    html = await page.text()
    assert page.status == 200 and page.content_type == "text/html"
    assert "/static/app.js" in html and "/static/style.css" in html
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    assert not re.search(r"(src|href)=\"(https?:)?//", html), "everything is served locally"
    scripts = [(f"/static/{name}", "text/javascript") for name in SCRIPTS]
    for path, kind in [
        *scripts,
        ("/static/style.css", "text/css"),
        ("/static/views.css", "text/css"),
    ]:
        asset = await http.get(web.url + path)
        assert asset.status == 200 and asset.content_type == kind
        assert "http://" not in await asset.text() and "https://" not in await asset.text()
    town = await (await http.get(web.url + "/api/town")).json()
    assert town == {
        "name": "mini",
        "areas": ["Hobbs Cafe", "Rodriguez home", "Mueller home"],
        "admin": True,
        "max_text": 10_000,
        "max_name": 80,
        "brain": {"label": "offline brain (deterministic, no LLM)", "offline": True, "behind": ""},
        "live": True,
        "replay": False,  # no recorded run yet
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
    await runtime.opened.engine.tick()  # the words are perceived in the next tick's batch
    with runtime.store.session() as s:
        visitor = s.exec(select(Visitor).where(Visitor.platform_user_id == "v-alice")).one()
        assert (visitor.platform, visitor.display_name) == ("web", "Alice")
        heard = s.exec(
            select(Memory.text)
            .join(Resident, col(Resident.id) == col(Memory.resident_id))
            .where(Resident.name == resident, col(Memory.text).contains("Alice (a visitor) said"))
        ).all()
        assert heard, "the resident remembers the visitor's words"
        ids = s.exec(select(Delivery.message_id).where(Delivery.status == "sent")).all()
        assert f"web:{web.feed.epoch}.{answer['id']}" in ids


async def test_commands_private_public_and_admin(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession
) -> None:
    def line(text: str, visitor: str = "v-alice") -> dict[str, str]:
        return {"line": text, "area": HOBBS, "name": "Alice", "visitor_id": visitor}

    look = await (await http.post(web.url + "/api/command", json=line("/look"))).json()
    assert look["private"] and look["ok"] and not look["published"]
    assert look["text"].startswith("Hobbs Cafe: a small cafe")
    unknown = await (await http.post(web.url + "/api/command", json=line("dance"))).json()
    assert not unknown["ok"] and "no command 'dance'" in unknown["text"]
    joined = await http.post(web.url + "/api/command", json=line("join Alice reporter"))
    body = await joined.json()  # the caller's answer: private (issue 30)
    assert body["private"] and not body["published"]
    assert body["text"].startswith("Welcome, Alice, reporter")
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


async def test_a_port_in_use_is_said_with_what_could_not_listen() -> None:
    from aiohttp import web

    from adapters.web.requests import listen

    first, url = await listen(web.Application(), "127.0.0.1", 0, "the web page")
    port = int(url.rsplit(":", 1)[1])
    try:
        with pytest.raises(OSError, match=rf"/metrics cannot listen on 127.0.0.1:{port}"):
            await listen(web.Application(), "127.0.0.1", port, "/metrics")
    finally:
        await first.cleanup()

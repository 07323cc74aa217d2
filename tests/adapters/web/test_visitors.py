"""Every visitor's words on the web page, whatever platform they were said on; nothing empty;
a request line too long for the server answered 400 with one log line."""

from __future__ import annotations

import asyncio
import logging

import aiohttp
import pytest
from sqlmodel import select

from adapters.core.delivery import OutboxPump
from adapters.web.server import WebAdapter
from bot.runtime.run import TownRuntime
from tests.adapters.web.support import HOBBS, events, someone_awake_at
from town.inputs.visit import Visit
from town.store.models import AuditEntry, ChatLine

# blank by category: a Hangul filler, a variation selector, a blank Braille cell, marks alone
BLANKS = ["\u3164", "\ufe0f", "\u2800", "\u0301\u0308", "\u3164 \u2800\ufe0f"]


@pytest.mark.parametrize(
    "text", ["\u200b\u200b", "\u0000\u0001", "\u202e", "\ud800", "@everyone", *BLANKS]
)
async def test_a_message_empty_once_cleaned_is_refused_and_nothing_is_kept(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession, text: str
) -> None:
    body = {"area": HOBBS, "name": "Bo", "visitor_id": "v-bo", "text": text}
    # (a lone surrogate cannot be encoded as UTF-8: sent as JSON's own escape, as a page would)
    data = '{"area": "Hobbs Cafe", "name": "Bo", "visitor_id": "v-bo", "text": "\\ud800"}'
    if text == "\ud800":
        headers = {"Content-Type": "application/json"}
        answer = await http.post(web.url + "/api/say", data=data, headers=headers)
    else:
        answer = await http.post(web.url + "/api/say", json=body)
    assert answer.status == 400
    assert "empty once cleaned" in (await answer.json())["error"]
    assert all(m.text for m in web.feed.recent(HOBBS, 200))  # no empty line in the feed
    assert not [m for m in web.feed.recent(HOBBS, 200) if m.kind == "visitor"]
    with runtime.store.session() as s:
        assert s.exec(select(ChatLine)).all() == []
        assert s.exec(select(AuditEntry).where(AuditEntry.kind == "say")).all() == []


@pytest.mark.parametrize(
    "name", ["I_s_a_b_e_l_l_a", "I s a b e l l a  R o d r i g u e z", "Isabel la Rodriguez"]
)
async def test_a_spaced_out_or_split_look_alike_of_a_resident_is_marked(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession, name: str
) -> None:
    body = {"area": HOBBS, "name": name, "visitor_id": "v-look", "text": "the party is off"}
    assert (await http.post(web.url + "/api/say", json=body)).status == 200
    (shown,) = [m for m in web.feed.recent(HOBBS, 200) if m.kind == "visitor"]
    assert shown.author == " ".join(name.split()) + " (a visitor)"
    with runtime.store.session() as s:
        (line,) = s.exec(select(ChatLine).where(ChatLine.kind == "visitor")).all()
    assert line.speaker == shown.author  # what residents hear is marked too


async def test_words_said_on_other_platforms_show_with_their_platform_live_and_after_a_restart(
    runtime: TownRuntime, web: WebAdapter, http: aiohttp.ClientSession
) -> None:
    resident = await someone_awake_at(runtime, HOBBS)
    pump = OutboxPump(runtime.store, runtime.town_id, web)
    await pump.deliver_pending()  # the morning so far
    runtime.pumps.append(pump)
    feed = await events(http, web.url)
    first = resident.split()[0]
    await runtime.visitor_says(
        Visit.of(HOBBS, "Dee", f"Hi {first}, from Discord!", "discord", "42")
    )
    question = await feed.until(lambda m: m["kind"] == "visitor")
    assert (question["author"], question["text"], question["platform"]) == (
        "Dee",
        f"Hi {first}, from Discord!",
        "discord",
    )
    answer = await feed.until(lambda m: m["kind"] == "resident")  # the answer after its question
    assert answer["author"] == resident and answer["id"] > question["id"]

    shell = Visit.of(HOBBS, "Sam", "Hello from the shell", "cli", "Sam")
    await runtime.visitor_says(shell)  # said by another process, read by the page in a second
    said = await feed.until(lambda m: m["kind"] == "visitor")
    assert (said["text"], said["platform"]) == ("Hello from the shell", "cli")

    await web.stop()
    again = WebAdapter(runtime, runtime.store, runtime.town_id, port=0)
    await again.start()
    try:
        url = f"{again.url}/api/history"
        after = await (await http.get(url, params={"area": HOBBS})).json()
    finally:
        await again.stop()
    visitors = [(m["author"], m["platform"]) for m in after["messages"] if m["kind"] == "visitor"]
    assert visitors == [("Dee", "discord"), ("Sam", "cli")]


async def test_a_request_line_over_the_limit_gets_a_400_and_one_log_line(
    web: WebAdapter, caplog: pytest.LogCaptureFixture
) -> None:
    host, port = web.url.removeprefix("http://").split(":")
    caplog.set_level(logging.DEBUG, logger="aiohttp")
    for _ in range(2):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET /api/history?area=" + b"x" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        status = await reader.readline()
        writer.close()
        assert status.startswith(b"HTTP/1.0 400") or status.startswith(b"HTTP/1.1 400"), status
    await asyncio.sleep(0)
    records = [r for r in caplog.records if r.name.startswith("aiohttp")]
    assert len(records) == 2 and all(r.exc_info is None for r in records), records
    assert all("refused a malformed request" in r.getMessage() for r in records)

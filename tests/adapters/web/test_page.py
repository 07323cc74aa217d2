"""The page in headless Chromium against ``bottown run``'s ``serve``."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlmodel import select

from adapters.core.ports import Outgoing
from adapters.web.server import WebAdapter
from bot.runtime.run import TownRuntime
from tests.adapters.web.support import HOBBS, someone_awake_at
from tests.browser import chromium_page
from tests.factories import MINITOWN
from town.store.models import Visitor


@contextlib.asynccontextmanager
async def running_town(
    tmp_path: Path, persona: Path | str = MINITOWN, name: str = "mini"
) -> AsyncIterator[TownRuntime]:
    """``bottown run`` on the web, as ``serve`` runs it; ticks only when the test ticks."""
    from bot.runtime.live import serve
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
        serve(settings, ["web"], town=name, persona=str(persona), ready=ready.set_result)
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
        await expect(page.locator("#feed .narration").first).to_be_visible()  # history, quiet

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

"""The page with visitors on other platforms and with words that are not words: a Discord
visitor's message shows with its platform, before the answer; zero-width spaces are refused
with the reason shown, and nothing is added to the channel."""

from __future__ import annotations

from pathlib import Path

from adapters.web.server import WebAdapter
from tests.adapters.web.support import HOBBS, someone_awake_at
from tests.adapters.web.test_page import running_town
from tests.browser import chromium_page
from town.inputs.visit import Visit


async def test_visitors_elsewhere_show_with_their_platform_and_empty_words_are_refused(
    tmp_path: Path,
) -> None:
    from playwright.async_api import expect

    async with running_town(tmp_path) as runtime, chromium_page() as browser:
        (adapter,) = runtime.adapters
        assert isinstance(adapter, WebAdapter)
        resident = await someone_awake_at(runtime, HOBBS)
        page = browser.page
        await page.goto(f"{adapter.url}/#Hobbs%20Cafe")
        await expect(page.locator("#channel-title")).to_have_text(HOBBS)
        await expect(page.locator("#connection")).to_have_text("live")
        first = resident.split()[0]
        await runtime.visitor_says(Visit.of(HOBBS, "Dee", f"Hi {first}!", "discord", "42"))
        words = page.locator("#feed .msg.visitor", has_text=f"Hi {first}!")
        await expect(words).to_be_visible()
        await expect(words.locator(".tag")).to_have_text("visitor on discord")
        answer = page.locator("#feed .msg.visitor ~ .msg.resident")
        await expect(answer.first).to_be_visible()  # the answer after its question

        shown = await page.locator("#feed .msg").count()
        await page.fill("#name", "Alice")
        await page.fill("#text", "\u200b\u200b")
        await page.press("#text", "Enter")
        await expect(page.locator("#status")).to_contain_text("empty once cleaned")
        assert await page.locator("#feed .msg").count() == shown
        assert not browser.errors, browser.errors

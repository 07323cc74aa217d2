"""The 👍/👎 under a resident's message in headless Chromium: a click rates it, the other
switches the rating, and the store keeps what the page shows."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlmodel import select

from adapters.web.server import WebAdapter
from tests.adapters.web.support import HOBBS, someone_awake_at
from tests.adapters.web.test_page import running_town
from tests.browser import PATIENCE_MS, chromium_page
from town.store.models import Reaction


async def test_a_visitor_rates_an_answer_in_the_browser(tmp_path: Path) -> None:
    from playwright.async_api import expect

    async with running_town(tmp_path) as runtime:
        resident = await someone_awake_at(runtime, HOBBS)

        def kept() -> list[tuple[str, str, str]]:
            with runtime.store.session() as s:
                return [(r.resident, r.emoji, r.task) for r in s.exec(select(Reaction)).all()]

        async def until_kept(wanted: list[tuple[str, str, str]]) -> None:
            for _ in range(PATIENCE_MS // 20):
                if kept() == wanted:
                    return
                await asyncio.sleep(0.02)
            raise AssertionError(f"the store kept {kept()}, not {wanted}")

        async with chromium_page() as browser:
            (adapter,) = runtime.adapters
            assert isinstance(adapter, WebAdapter)
            page = browser.page
            await page.goto(f"{adapter.url}/#Hobbs%20Cafe")
            await expect(page.locator("#channel-title")).to_have_text(HOBBS)
            await page.fill("#name", "Robin")
            await page.fill("#text", f"{resident.split()[0]}, how are you today?")
            await page.press("#text", "Enter")
            answer = page.locator(f'#feed .msg.resident[data-author="{resident}"]').last
            await expect(answer).to_be_visible()
            up = answer.locator(".rating").first
            assert await up.get_attribute("aria-label") == f"rate up: {resident}"

            await up.click()
            await expect(answer.locator(".rating").first).to_have_attribute("aria-pressed", "true")
            await until_kept([(resident, "👍", "visitor")])
            await answer.locator(".rating").last.click()  # changed their mind
            await expect(answer.locator(".rating").last).to_have_attribute("aria-pressed", "true")
            await expect(answer.locator(".rating").first).to_have_attribute("aria-pressed", "false")
            await until_kept([(resident, "👎", "visitor")])
            assert browser.errors == []

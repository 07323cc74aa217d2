"""A visitor's greeting in the browser, as in a chat: at a cafe with five residents awake, the
page shows a resident typing, then the answer as a normal message, without waiting for a tick."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from adapters.web.server import WebAdapter
from tests.adapters.web.support import HOBBS
from tests.adapters.web.test_page import running_town
from tests.browser import chromium_page
from town.llm.tasks import UTTER
from town.store.models import Resident, Town
from town.tick.state import ResidentState


async def test_a_greeting_at_a_full_cafe_shows_typing_then_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.async_api import expect

    async with running_town(tmp_path, "smallville", "smallville") as runtime:
        with runtime.store.session() as s:  # five residents awake in the cafe's seating area
            rows = s.exec(select(Resident).where(Resident.town_id == runtime.town_id)).all()
            five = sorted(rows, key=lambda r: r.name)[:5]
            for row in five:
                row.location = f"{HOBBS}: seating area"
                state = ResidentState.of(row)
                state.awake = True
                state.save(row)
                s.add(row)
            s.commit()
            clock = s.exec(select(Town.clock).where(Town.id == runtime.town_id)).one()

        # the answer waits until the page has shown someone typing (no clock in the test)
        typed = asyncio.Event()
        brain = runtime.engine.brain
        think = brain.run

        async def held(task: Any, data: Any, **kwargs: Any) -> Any:
            if task is UTTER:
                await typed.wait()
            return await think(task, data, **kwargs)

        monkeypatch.setattr(brain, "run", held)
        async with chromium_page() as browser:
            (adapter,) = runtime.adapters
            assert isinstance(adapter, WebAdapter)
            page = browser.page
            await page.goto(f"{adapter.url}/#Hobbs%20Cafe")
            await expect(page.locator("#channel-title")).to_have_text(HOBBS)
            await page.fill("#name", "Alice")
            await page.fill("#text", "Hello everyone!")
            await page.press("#text", "Enter")
            await expect(
                page.locator("#feed .msg.visitor", has_text="Hello everyone")
            ).to_be_visible()
            await expect(page.locator("#typing")).to_contain_text("is typing")
            typed.set()
            names = [row.name for row in five]
            answer = page.locator("#feed .msg.visitor ~ .msg.resident")
            await expect(answer.first).to_be_visible()  # a message of its own, not narration
            assert await answer.first.get_attribute("data-author") in names
            await expect(answer.first.locator(".text")).not_to_be_empty()
            await expect(page.locator("#typing")).to_have_text("")
            await expect(page.locator("#feed")).not_to_contain_text("caught up")  # no digest
            assert not browser.errors and not browser.console, (browser.errors, browser.console)
        with runtime.store.session() as s:  # all of it within one tick interval: no tick ran
            assert s.exec(select(Town.clock).where(Town.id == runtime.town_id)).one() == clock

"""The town page in headless Chromium: the map, moves, resident cards, the hash, the typing
line, the phone layout and the replay's scrubber. Each test writes its screenshots to
``data/screenshots/`` (1280 x 800 and 420 x 800) for a person to look at."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from adapters.core.ports import Outgoing
from adapters.web.replay import ReplayPage, read_replay
from adapters.web.server import WebAdapter
from bot.runtime.run import TownRuntime
from bot.runtime.towns import simulate
from tests.adapters.web.support import HOBBS, someone_awake_at
from tests.adapters.web.test_page import running_town
from tests.browser import chromium_page
from tests.factories import resident
from town.store.models import Memory
from town.views.card import MapPlace
from town.views.places import whereabouts

if TYPE_CHECKING:
    from playwright.async_api import Page

SHOTS = Path(__file__).resolve().parents[3] / "data" / "screenshots"
WIDE = {"width": 1280, "height": 800}
PHONE = {"width": 420, "height": 800}


async def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    width = page.viewport_size["width"] if page.viewport_size else 0
    await page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), animations="disabled")


async def places_of(runtime: TownRuntime) -> dict[str, tuple[str, bool]]:
    seen = await whereabouts(runtime.engine)
    return {name: (area, up) for area, here in seen.by_area.items() for name, _, up in here}


async def test_the_map_follows_the_town_and_opens_cards_and_channels(tmp_path: Path) -> None:
    from playwright.async_api import expect

    async with running_town(tmp_path) as runtime, chromium_page() as browser:
        (adapter,) = runtime.adapters
        assert isinstance(adapter, WebAdapter)
        page = browser.page
        await page.set_viewport_size(WIDE)
        await page.goto(adapter.url)
        await expect(page.locator("#town-name")).to_have_text("mini")
        await expect(page.locator("#welcome")).to_contain_text("AI personas")
        await expect(page.locator("#welcome")).to_contain_text("offline brain")
        await expect(page.locator("#try-interview")).to_contain_text("/interview Isabella ")
        await expect_the_store(page, runtime)
        await page.click("#welcome-close")

        before = await places_of(runtime)  # a move in the town moves the emoji on the page
        for _ in range(12):
            await runtime.engine.tick()
            now = await places_of(runtime)
            if moved := [n for n in now if now[n][0] != before[n][0]]:
                break
        else:
            raise AssertionError("nobody moved in 12 ticks")
        runtime.wake.set()
        left = page.locator(
            f"#map .area[data-area='{before[moved[0]][0]}'] [data-name='{moved[0]}']"
        )
        await expect(left).to_have_count(0)
        await expect_the_store(page, runtime)
        speaker = await someone_awake_at(runtime, HOBBS)
        keep_private(runtime, speaker)
        runtime.wake.set()
        await expect_the_store(page, runtime)
        await shot(page, "map")
        await page.reload()
        await expect(page.locator("#map .token").first).to_be_visible()
        await expect(page.locator("#welcome")).to_be_hidden()  # dismissed is remembered

        await page.locator(f"#map .token[data-name='{speaker}']").click()
        card = page.locator("#card")
        await expect(card).to_be_visible()
        await expect(card.locator("h2")).to_have_text(speaker)
        await expect(card.locator(".plan li").first).to_be_visible()
        await expect(card).to_contain_text("a public thought of the morning")
        await expect(card).not_to_contain_text("private")
        await shot(page, "card")
        await page.click("#card-close")

        await page.locator(f"#map .area[data-area='{HOBBS}']").click()
        await expect(page.locator("#channel-title")).to_have_text(HOBBS)
        assert await page.evaluate("location.hash") == f"#{quote(HOBBS)}"
        await adapter.typing(HOBBS, speaker)
        await expect(page.locator("#typing")).to_have_text(
            f"{avatar(runtime, speaker)} {speaker} is typing…"
        )
        await adapter.send(Outgoing("t1", HOBBS, speaker, "Good morning, everyone!", "💬"))
        said = page.locator(
            f"#feed > .msg.resident[data-author='{speaker}']", has_text="Good morning"
        )
        await expect(said.locator(".avatar")).to_have_text(avatar(runtime, speaker))  # their own
        await expect(page.locator("#typing")).to_have_text("")
        await expect(page.locator("#feed .narration").first).to_be_attached()
        await shot(page, "channel")
        await page.check("#speech-only")
        await expect(page.locator("#feed .narration").first).to_be_hidden()
        await expect(said).to_be_visible()

        home = "Mueller home"  # the address names the place; back goes to the one before
        await page.locator(f"#channels button[data-area='{home}']").click()
        await expect(page.locator("#channel-title")).to_have_text(home)
        await page.go_back()
        await expect(page.locator("#channel-title")).to_have_text(HOBBS)
        await page.goto(f"{adapter.url}/#{quote(home)}")
        await expect(page.locator("#channel-title")).to_have_text(home)
        assert not browser.errors and not browser.console, (browser.errors, browser.console)


async def test_on_a_phone_the_drawer_opens_and_a_message_goes(tmp_path: Path) -> None:
    from playwright.async_api import expect

    async with running_town(tmp_path) as runtime, chromium_page() as browser:
        (adapter,) = runtime.adapters
        assert isinstance(adapter, WebAdapter)
        speaker = await someone_awake_at(runtime, HOBBS)
        runtime.wake.set()
        page = browser.page
        await page.set_viewport_size(PHONE)
        await page.goto(adapter.url)
        await expect(page.locator("#map .token").first).to_be_visible()
        await expect(page.locator(".channel")).to_be_hidden()  # map and channel are tabs
        await shot(page, "map")
        await page.click("#welcome-close")
        await page.click("#places-toggle")
        drawer = page.locator(f"#channels button[data-area='{HOBBS}']")
        await expect(drawer).to_be_in_viewport()
        await drawer.click()
        await expect(page.locator("#channel-title")).to_have_text(HOBBS)
        await expect(drawer).not_to_be_in_viewport()  # the drawer closes on a choice
        await page.fill("#name", "Alice")
        await page.fill("#text", f"Hello {speaker.split()[0]}!")
        await page.press("#text", "Enter")
        await expect(page.locator("#feed .msg.visitor", has_text="Hello")).to_be_visible()
        for part in ("#feed", "#composer", "#text", "#send"):  # nothing cut
            box = await page.locator(part).bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], part
        feed = await page.locator("#feed").bounding_box()
        assert feed and feed["height"] > PHONE["height"] / 3, "the conversation uses the height"
        await shot(page, "channel")
        await page.locator("#channel-people .person").first.click()
        await expect(page.locator("#card .plan li").first).to_be_visible()
        await shot(page, "card")
        assert not browser.errors and not browser.console, (browser.errors, browser.console)


async def test_a_replays_scrubber_sets_the_clock_and_the_map(runtime: TownRuntime) -> None:
    from playwright.async_api import expect

    path = runtime.settings.data_dir / "replays" / "mini.jsonl"
    start = runtime.opened.town.clock
    await simulate(runtime.opened, start + timedelta(hours=2), path)
    middle = await places_of(runtime)  # the store's truth at that moment
    with runtime.store.session() as s:
        moment = runtime.engine.town(s).clock
    await simulate(runtime.opened, moment + timedelta(hours=2), path)
    spec = runtime.engine.spec
    places = [MapPlace(a.name, a.description, a.map) for a in spec.areas]
    avatars = {r.name: r.avatar_emoji for r in spec.residents}
    player = ReplayPage(read_replay(path), spec.name, places, avatars)
    await player.start()
    try:
        async with chromium_page() as browser:
            page = browser.page
            for size in (WIDE, PHONE):
                await page.set_viewport_size(size)
                await page.goto(player.url)
                await expect(page.locator("#replay-bar")).to_be_visible()
                await page.eval_on_selector(
                    "#scrubber",
                    "(s, t) => { s.value = t; s.dispatchEvent(new Event('input')); }",
                    str(int(moment.timestamp() * 1000)),
                )
                await expect(page.locator("#clock")).to_have_attribute(
                    "data-time", f"{moment:%H:%M}"
                )
                await expect(page.locator("#clock")).to_contain_text(f"Monday {moment:%H:%M}")
                for name, (area, awake) in middle.items():
                    token = page.locator(
                        f"#map .area[data-area='{area}'] .token[data-name='{name}']"
                    )
                    await expect(token).to_have_class("token" if awake else "token asleep")
                await page.locator(f"#map .area[data-area='{HOBBS}']").click()
                await expect(page.locator("#channel-title")).to_have_text(HOBBS)
                await expect(page.locator("#composer")).to_be_hidden()
                await shot(page, "replay")
            await page.click("#play")
            await expect(page.locator("#clock")).not_to_have_attribute(
                "data-time", f"{moment:%H:%M}"
            )
            assert not browser.errors and not browser.console, (browser.errors, browser.console)
    finally:
        await player.stop()


async def expect_the_store(page: Page, runtime: TownRuntime) -> None:
    """Every resident on the map in the area the store says, dimmed when asleep."""
    from playwright.async_api import expect

    for name, (area, awake) in (await places_of(runtime)).items():
        token = page.locator(f"#map .area[data-area='{area}'] .token[data-name='{name}']")
        await expect(token).to_have_class("token" if awake else "token asleep")


def keep_private(runtime: TownRuntime, name: str) -> None:
    """A private and a public memory of ``name``'s, the newest they have."""
    row = resident(runtime.store, name)
    with runtime.store.session() as s:
        later = runtime.engine.town(s).clock + timedelta(minutes=1)
        for text, private in (
            ("a private matter", True),
            ("a public thought of the morning", False),
        ):
            s.add(Memory(resident_id=row.id, kind="observation", text=text, created=later,
                         last_access=later, importance=5, private=private))  # fmt: skip
        s.commit()


def avatar(runtime: TownRuntime, name: str) -> str:
    return runtime.engine.spec.resident(name).avatar_emoji

"""The live feed's memory: each channel's newest messages; a stuck page is dropped."""

from __future__ import annotations

from adapters.web.feed import QUEUE, Feed
from tests.adapters.web.support import HOBBS


def test_a_channel_keeps_its_newest_and_a_stuck_page_is_dropped() -> None:
    feed = Feed(keep=5)
    stuck = feed.listen()
    for n in range(QUEUE + 1):
        feed.add(HOBBS, "", f"news {n}")
    assert [m.text for m in feed.recent(HOBBS, 100)] == [f"news {n}" for n in range(996, 1001)]
    assert stuck.queue.get_nowait() is None and stuck.queue.empty()  # told to go; it reconnects
    feed.add(HOBBS, "", "later")
    assert stuck.queue.empty()

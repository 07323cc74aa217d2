"""Outbox keys (``town.outbox.keys``): an event's, a digest's, a part's."""

from __future__ import annotations

import pytest

from town.outbox.keys import digest_holds, digest_key, event_key, part_key, whole_key


def test_an_events_key_names_its_town_its_unit_of_work_and_its_place_in_it() -> None:
    assert event_key(3, "say:ab12", 0) == "3:say:ab12:0"


def test_a_digests_key_names_every_event_it_holds() -> None:
    key = digest_key([17, 12, 13, 14, 20, 13])
    assert key == "digest:12-14,17,20"
    assert digest_holds(key) == [12, 13, 14, 17, 20]
    assert digest_holds(part_key(key, 2, 3)) == [12, 13, 14, 17, 20]
    assert digest_holds("3:say:ab12:0") is None
    with pytest.raises(ValueError):
        digest_key([])


def test_a_parts_key_is_its_messages_key_and_number_and_gives_it_back() -> None:
    assert part_key("3:t:0", 1, 1) == "3:t:0"  # one part: the message's own key
    assert [part_key("3:t:0", n, 2) for n in (1, 2)] == ["3:t:0#1", "3:t:0#2"]
    assert whole_key("3:t:0#2") == "3:t:0" and whole_key("3:t:0") == "3:t:0"
    assert whole_key("digest:4-9#12") == "digest:4-9"

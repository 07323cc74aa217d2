"""The text every adapter shares: long texts in parts, outbox events as channel lines."""

from __future__ import annotations

import pytest

from adapters.core.text import render, split_text


def test_split_text_keeps_every_character() -> None:
    assert split_text("", 10) == []
    assert split_text("short.", 10) == ["short."]
    assert split_text("a" * 25, 10) == ["a" * 10, "a" * 10, "a" * 5]
    words = "word " * 50
    parts = split_text(words, 23)
    assert all(len(p) <= 23 for p in parts) and " ".join(parts) == words.strip()
    with pytest.raises(ValueError):
        split_text("x", 0)


def test_render_shows_speech_as_the_resident_and_hides_inner_life() -> None:
    said = render("said", {"resident": "Klaus", "text": "Hello.", "emoji": "📚"})
    assert said == ("Klaus", "Hello.", "📚")
    assert render("reflected", {"resident": "Klaus", "text": "Klaus reflected"}) is None
    assert render("said", {"resident": "Klaus", "text": "  "}) is None

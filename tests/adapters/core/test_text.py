"""The text every adapter shares: outbox events as channel lines (long texts in parts:
tests/town/test_text.py)."""

from __future__ import annotations

from adapters.core.text import render


def test_render_shows_speech_as_the_resident_and_hides_inner_life() -> None:
    said = render("said", {"resident": "Klaus", "text": "Hello.", "emoji": "📚"})
    assert said == ("Klaus", "Hello.", "📚")
    assert render("reflected", {"resident": "Klaus", "text": "Klaus reflected"}) is None
    assert render("said", {"resident": "Klaus", "text": "  "}) is None

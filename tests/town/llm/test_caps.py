"""The caps on what a model writes (the cut itself: tests/town/test_text.py)."""

from __future__ import annotations

from town.llm.schemas import SPEECH_CAP, InterviewResult, UtterResult, capped


def test_only_text_is_capped() -> None:
    assert capped(7, 3) == 7 and capped("  a b c d  ", 5) == "a b c"


def test_result_models_cap_what_anyone_writes() -> None:
    said = UtterResult(text="Hello there. " * 200, end=False).text
    assert len(said) <= SPEECH_CAP and said.endswith("there.")
    assert len(InterviewResult(answer="word " * 50_000).answer) <= 1000

"""Cutting text to its cap at a sentence or word boundary."""

from __future__ import annotations

from town.llm.caps import capped, cut
from town.llm.schemas import SPEECH_CAP, InterviewResult, UtterResult


def test_short_text_is_kept() -> None:
    assert cut("Good morning.", 20) == "Good morning."


def test_long_text_is_cut_after_a_whole_sentence() -> None:
    text = "I opened the cafe early. Then I baked bread for the party. And then more."
    assert cut(text, 60) == "I opened the cafe early. Then I baked bread for the party."


def test_without_a_sentence_end_the_cut_falls_between_words() -> None:
    assert cut("one two three four five six", 16) == "one two three"


def test_one_long_word_is_cut_hard() -> None:
    assert cut("x" * 50, 10) == "x" * 10


def test_only_text_is_capped() -> None:
    assert capped(7, 3) == 7 and capped("  a b c d  ", 5) == "a b c"


def test_result_models_cap_what_anyone_writes() -> None:
    said = UtterResult(text="Hello there. " * 200, end=False).text
    assert len(said) <= SPEECH_CAP and said.endswith("there.")
    assert len(InterviewResult(answer="word " * 50_000).answer) <= 1000

"""Text made fit for where it goes (``town.text``): one clean line, a cut at a natural boundary,
a long text in parts."""

from __future__ import annotations

import pytest

from town.text import EmptyWords, clean_text, cut, in_parts, name_of, plain, shows_something, spoken

# -- one clean line ------------------------------------------------------------------------------


def test_a_clean_line_has_no_control_characters_and_folded_space() -> None:
    assert clean_text("Hello Isabella,\x07 what is\non the menu?") == (
        "Hello Isabella, what is on the menu?"
    )
    assert clean_text("Alice\x1b[31m") == "Alice [31m"
    assert clean_text("\u200b\u200b \u202e\t") == ""


@pytest.mark.parametrize(
    ("text", "heard"),
    [
        ("@everyone @here party at mine <@U0123456789> <!channel>", "party at mine"),
        ("<!subteam^S1|@team name> ＠channel hi @Isabella", "hi Isabella"),
        ("mail me at bo@here.com", "mail me at bo@here.com"),
        ("<3 you", "<3 you"),
    ],
)
def test_a_plain_line_holds_no_ping_or_mention_markup(text: str, heard: str) -> None:
    assert plain(text) == heard
    assert plain(heard) == heard  # (made once; again it changes nothing)


@pytest.mark.parametrize(
    "blank", ["\u3164", "\ufe0f", "\u2800", "\u0301\u0308", "\u200b", " ", "", "\u115f\uffa0", "?!"]
)
def test_words_that_show_no_letter_digit_or_emoji_are_blank(blank: str) -> None:
    assert not shows_something(blank)
    with pytest.raises(EmptyWords):
        spoken("Bo", blank)


@pytest.mark.parametrize("words", ["hi", "7", "👍", "♥", "e\u0301", "안녕", "\u3164hi"])
def test_words_with_a_letter_digit_or_emoji_are_heard(words: str) -> None:
    assert shows_something(words) and spoken("Bo", words).heard


def test_spoken_words_keep_what_was_said_apart_from_what_is_heard() -> None:
    said = spoken("<!channel>", "@everyone hi\x07 there")
    assert (said.said, said.heard, said.name) == ("@everyone hi there", "hi there", "a visitor")
    assert name_of("x" * 100) == "x" * 79 + "…"


def test_dropped_unprintables_leave_no_gap_but_white_space_still_parts_words() -> None:
    assert clean_text("running for mayor\x00!", unprintable="") == "running for mayor!"
    assert clean_text("one\ttwo\r\nthree", unprintable="") == "one two three"


def test_a_long_line_is_cut_with_an_ellipsis() -> None:
    assert clean_text("x" * 10, 10) == "x" * 10
    assert clean_text("x" * 11, 10) == "x" * 9 + "…"
    assert len(clean_text("y" * 100_000)) == 2000


# -- a cut at a natural boundary -----------------------------------------------------------------


def test_short_text_is_kept() -> None:
    assert cut("Good morning.", 20) == "Good morning."


def test_long_text_is_cut_after_a_whole_sentence() -> None:
    text = "I opened the cafe early. Then I baked bread for the party. And then more."
    assert cut(text, 60) == "I opened the cafe early. Then I baked bread for the party."
    assert cut('She said "hi." Then she left the cafe.', 20) == 'She said "hi."'


def test_without_a_sentence_end_the_cut_falls_between_words() -> None:
    assert cut("one two three four five six", 16) == "one two three"


def test_one_long_word_is_cut_hard() -> None:
    assert cut("x" * 50, 10) == "x" * 10


# -- a long text in parts ------------------------------------------------------------------------


def test_parts_keep_every_character() -> None:
    assert in_parts("", 10) == []
    assert in_parts("short.", 10) == ["short."]
    assert in_parts("a" * 25, 10) == ["a" * 10, "a" * 10, "a" * 5]
    words = "word " * 50
    parts = in_parts(words, 23)
    assert all(len(p) <= 23 for p in parts) and " ".join(parts) == words.strip()
    with pytest.raises(ValueError):
        in_parts("x", 0)


def test_parts_end_at_sentence_ends() -> None:
    text = "The cafe opens at eight. Bread comes at nine!  Lunch? At noon."
    assert in_parts(text, 30) == [
        "The cafe opens at eight.",
        "Bread comes at nine! Lunch?",
        "At noon.",
    ]

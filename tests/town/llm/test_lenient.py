"""Reading a reply leniently: the JSON wherever it stands, mended where its meaning is clear."""

from __future__ import annotations

import pytest

from tests.helpers import sample
from town.llm.structured import NoJSON, load, mend
from town.llm.tasks import EMOJI, RATE_IMPORTANCE, REACT


@pytest.mark.parametrize(
    "reply",
    [
        '{"a": 1}',
        '```json\n{"a": 1}\n```',
        'Sure! Here it is: {"a": 1} Hope that helps {not json}',
        'Reasoning first.\n```\n{"a": 1}\n```\nDone.',
    ],
)
def test_the_json_object_is_found_wherever_it_stands(reply: str) -> None:
    assert load(reply) == {"a": 1}


def test_raw_control_characters_inside_strings_are_accepted() -> None:
    assert load('{"text": "line one\nline\ttwo"}') == {"text": "line one\nline\ttwo"}


@pytest.mark.parametrize("reply", ["", "I would rather chat.", '{"a": 1'])
def test_a_reply_without_an_object_says_so(reply: str) -> None:
    with pytest.raises(NoJSON):
        load(reply)


def test_numbers_as_strings_and_out_of_range_are_mended() -> None:
    inputs = sample(RATE_IMPORTANCE)
    schema = RATE_IMPORTANCE.schema_for(inputs)
    count = len(inputs.observations)
    scores = ["11", 0, "7", 4.6, -3, 2, 9][:count]
    assert mend({"scores": scores}, schema)["scores"] == [10, 1, 7, 5, 1, 2, 9][:count]


def test_extra_items_past_an_exact_count_are_cut() -> None:
    inputs = sample(RATE_IMPORTANCE)
    reply = '{"scores": [' + ", ".join(["5"] * (len(inputs.observations) + 4)) + "]}"
    assert RATE_IMPORTANCE.parse(inputs, reply).scores == [5] * len(inputs.observations)


def test_booleans_as_words_and_long_text_are_mended() -> None:
    inputs = sample(REACT)
    reply = '{"react": "yes", "reaction": "' + "talk. " * 5000 + '", "talk_to": null}'
    result = REACT.parse(inputs, reply)
    assert result.react is True and 0 < len(result.reaction) <= 300


@pytest.mark.parametrize(
    ("talk_to", "meant"),
    [
        ('"Klaus Mueller"', "Klaus Mueller"),
        ('"  klaus MUELLER "', "Klaus Mueller"),  # a name of those present, in any case
        ('"Sure, I will go and ask Klaus about his research right now."', None),
        ('"Alice"', None),  # a visitor is not someone a reaction talks to
        ('""', None),
        ("null", None),
    ],
)
def test_talk_to_is_one_of_those_present_or_none(talk_to: str, meant: str | None) -> None:
    inputs = sample(REACT, present=["Klaus Mueller", "Maria Lopez"])
    reply = '{"react": true, "reaction": "waving", "talk_to": ' + talk_to + "}"
    assert REACT.parse(inputs, reply).talk_to == meant


def test_with_no_one_present_talk_to_is_none() -> None:
    reply = '{"react": true, "reaction": "waving", "talk_to": "Klaus Mueller"}'
    assert REACT.parse(sample(REACT, present=[]), reply).talk_to is None
    assert mend("Klaus Mueller", {"type": "null"}) is None


def test_what_cannot_be_mended_is_left_for_validation() -> None:
    inputs = sample(RATE_IMPORTANCE)
    with pytest.raises(ValueError, match="scores"):
        RATE_IMPORTANCE.parse(inputs, '{"scores": [3]}')
    with pytest.raises(ValueError):
        EMOJI.parse(sample(EMOJI), '{"emoji": ')

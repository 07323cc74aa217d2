"""The word lists the offline brain thinks with: ``lexicon.toml`` beside this module, read once."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType

_LISTS = tomllib.loads(resources.files(__package__).joinpath("lexicon.toml").read_text("utf-8"))

# Importance of an observation by the words it contains (the highest match wins).
IMPORTANCE: Mapping[str, int] = MappingProxyType(_LISTS["importance"])
# Emoji for an action by the words it contains, in order of appearance.
EMOJI: Mapping[str, str] = MappingProxyType(_LISTS["emoji"])
# Words that point an activity to kinds of places.
PLACE_HINTS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {word: tuple(kinds) for word, kinds in _LISTS["place_hints"].items()}
)
# How an action changes an object's state: (words in the action, the new state), in order.
STATE_CHANGES: tuple[tuple[tuple[str, ...], str], ...] = tuple(
    (tuple(words), state) for state, words in _LISTS["state_changes"].items()
)
HOME_ACTIVITY: frozenset[str] = frozenset(_LISTS["home_activity"])
PLACE_WORDS: frozenset[str] = frozenset(_LISTS["place_words"])
HOME_ONLY: tuple[str, ...] = tuple(_LISTS["home_only"])  # steps done only at home
HOME_WORDS: frozenset[str] = frozenset(_LISTS["home_words"])
ALARM_WORDS: frozenset[str] = frozenset(_LISTS["alarm_words"])  # salient enough to react to
GREETINGS: frozenset[str] = frozenset(_LISTS["greetings"])
AI_WORDS: frozenset[str] = frozenset(_LISTS["ai_words"])
STOPWORDS: frozenset[str] = frozenset(_LISTS["stopwords"])
# How residents talk: sentence plans per task (lists of phrasings, or one phrasing).
TALK: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        key: tuple(value) if isinstance(value, list) else (value,)
        for key, value in _LISTS["talk"].items()
    }
)
NEWS_WORDS: frozenset[str] = frozenset(TALK["news_words"])
PLAN_WORDS: frozenset[str] = frozenset(TALK["plan_words"])
DOING_WORDS: frozenset[str] = frozenset(TALK["doing_words"])
HUMAN_WORDS: frozenset[str] = frozenset(TALK["human_words"])


@dataclass(frozen=True)
class HeardKind:
    """One kind of visitor's line: its example lines and keyword rules (``[heard.<kind>]``)."""

    examples: tuple[str, ...]
    keywords: tuple[re.Pattern[str], ...]

    def matches(self, text: str) -> bool:
        return any(rule.search(text) for rule in self.keywords)


# What a visitor's line may be, by kind (hearing.py).
HEARD: Mapping[str, HeardKind] = MappingProxyType(
    {
        kind: HeardKind(
            tuple(entry["examples"]),
            tuple(re.compile(rule, re.IGNORECASE) for rule in entry.get("keywords", [])),
        )
        for kind, entry in _LISTS["heard"].items()
    }
)
# How residents answer a visitor: phrasings per answer.
VISIT: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {key: tuple(value) for key, value in _LISTS.get("visit", {}).items()}
)

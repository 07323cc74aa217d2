"""Which reactions mean what: a configurable set of "up" emoji and one of "down"; any other
reaction is counted apart (``BOTTOWN_REACTIONS_UP``, ``BOTTOWN_REACTIONS_DOWN``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

DEFAULT_UP = ("👍", "❤️", "😂", "⭐")
DEFAULT_DOWN = ("👎", "😕", "🙄")
UP, DOWN, OTHER = "up", "down", "other"
_VARIATIONS = str.maketrans("", "", "\ufe0e\ufe0f")  # "❤" and "❤️" are one heart


def plain(emoji: str) -> str:
    """An emoji without its presentation selectors or skin tone, as reactions compare it."""
    return "".join(c for c in emoji.translate(_VARIATIONS) if not 0x1F3FB <= ord(c) <= 0x1F3FF)


@dataclass(frozen=True)
class Moods:
    """The up and the down reactions; ``of`` reads one."""

    up: frozenset[str]
    down: frozenset[str]

    @classmethod
    def of_lists(cls, up: Iterable[str] = DEFAULT_UP, down: Iterable[str] = DEFAULT_DOWN) -> Moods:
        ups = frozenset(plain(e) for e in up if e.strip())
        downs = frozenset(plain(e) for e in down if e.strip())
        both = ups & downs
        if both:
            raise ValueError(f"a reaction cannot be both up and down: {' '.join(sorted(both))}")
        return cls(ups, downs)

    def of(self, emoji: str) -> str:
        """``up``, ``down`` or ``other``."""
        key = plain(emoji)
        return UP if key in self.up else DOWN if key in self.down else OTHER


DEFAULT_MOODS = Moods.of_lists()

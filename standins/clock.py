"""A monotonic clock that moves only when told to: what the stand-ins judge rate limits and
deadlines on, so tests move time instead of waiting for it."""

from __future__ import annotations


class Clock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

"""Rate limits: how fast one visitor may talk to a town, and how fast a channel is written to.

Both count real (monotonic) seconds, kept in memory by the one process that runs the town: a
town has one owner at a time, so its limits need no database. The clock is injected for tests.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

WINDOW_S = 60.0  # both limits are "per minute"


class TokenBucket:
    """Holds up to ``capacity`` tokens and gains ``per_second`` of them back as time passes; a
    message takes one. A full bucket lets a burst of ``capacity`` through at once."""

    def __init__(self, capacity: float, per_second: float, now: float) -> None:
        if capacity < 1 or per_second <= 0:
            raise ValueError("a token bucket needs a capacity of at least 1 and a positive rate")
        self.capacity = capacity
        self.per_second = per_second
        self.tokens = capacity
        self.updated = now

    def _refill(self, now: float) -> None:
        if now > self.updated:
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.per_second)
            self.updated = now

    def take(self, now: float) -> bool:
        self._refill(now)
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False

    def full(self, now: float) -> bool:
        self._refill(now)
        return self.tokens >= self.capacity


@dataclass(frozen=True)
class Verdict:
    """What a visitor's message may do: be heard, or not; and whether to tell them why."""

    allowed: bool
    notify: bool = False  # the first refusal of its window: one polite notice


HEARD = Verdict(True)


@dataclass
class _Visitor:
    bucket: TokenBucket
    noticed_at: float | None = None  # when the last notice was given


class _Rate:
    """A limit of ``per_minute`` (0: none) over windows of ``window_s`` seconds on ``clock``."""

    def __init__(
        self,
        per_minute: int,
        *,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_minute < 0:
            raise ValueError("messages per minute cannot be negative")
        self.per_minute = per_minute
        self.window_s = window_s
        self.clock = clock


class VisitorRateLimit(_Rate):
    """At most ``per_minute`` messages a minute per visitor (a platform and a user id), with
    bursts of up to ``per_minute``. A refused message earns one notice per ``window_s``
    seconds, never more. ``per_minute`` 0 lets everything through."""

    PRUNE_EVERY = 512  # checks between sweeps of idle visitors (keeps memory bounded)

    def __init__(self, per_minute: int, **options: Any) -> None:
        super().__init__(per_minute, **options)
        self._visitors: dict[tuple[str, str], _Visitor] = {}
        self._checks = 0

    def check(self, platform: str, user_id: str) -> Verdict:
        """Take one message from the visitor's allowance."""
        if self.per_minute == 0:
            return HEARD
        now = self.clock()
        self._checks += 1
        if self._checks % self.PRUNE_EVERY == 0:
            self._prune(now)
        key = (platform, user_id)
        seen = self._visitors.get(key)
        if seen is None:
            bucket = TokenBucket(self.per_minute, self.per_minute / self.window_s, now)
            seen = self._visitors[key] = _Visitor(bucket)
        if seen.bucket.take(now):
            return HEARD
        if seen.noticed_at is None or now - seen.noticed_at >= self.window_s:
            seen.noticed_at = now
            return Verdict(False, notify=True)
        return Verdict(False)

    def tracked(self) -> int:
        """How many visitors are remembered now."""
        return len(self._visitors)

    def _prune(self, now: float) -> None:
        """Forget visitors whose allowance is whole again and whose notice window is over."""
        idle = [
            key
            for key, seen in self._visitors.items()
            if seen.bucket.full(now)
            and (seen.noticed_at is None or now - seen.noticed_at >= self.window_s)
        ]
        for key in idle:
            del self._visitors[key]


class ChannelRate(_Rate):
    """At most ``per_minute`` posts in any ``window_s`` seconds per channel (a sliding window
    of post times). ``per_minute`` 0 is no limit."""

    def __init__(self, per_minute: int, **options: Any) -> None:
        super().__init__(per_minute, **options)
        self._posts: dict[str, deque[float]] = {}

    def room(self, channel: str) -> int | None:
        """Posts the channel may take now (``None``: no limit)."""
        if self.per_minute == 0:
            return None
        return self.per_minute - len(self._recent(channel, self.clock()))

    def wait(self, channel: str) -> float:
        """Seconds until the channel may take one more post (0 when it may now)."""
        if self.per_minute == 0:
            return 0.0
        now = self.clock()
        posts = self._recent(channel, now)
        if len(posts) < self.per_minute:
            return 0.0
        return max(0.0, posts[len(posts) - self.per_minute] + self.window_s - now)

    def note(self, channel: str) -> None:
        """A post went (or was attempted) now."""
        if self.per_minute == 0:
            return
        now = self.clock()
        posts = self._recent(channel, now)
        posts.append(now)

    def _recent(self, channel: str, now: float) -> deque[float]:
        posts = self._posts.setdefault(channel, deque())
        while posts and now - posts[0] >= self.window_s:
            posts.popleft()
        return posts

"""A channel's allowance: how many posts it may take in a minute, how far apart, and the share of
it kept free for replies to people.

Two limits meet in a channel: ours (``BOTTOWN_CHANNEL_MESSAGES_PER_MINUTE``, a sliding minute;
0: none) and the platform's (``Platform.min_interval_s`` between two posts, Discord's 2.5 s
keeping a webhook below its 30 posts a minute). Narration (the town's lines, residents' talk
among themselves, digests) may use the minute only up to ``per_minute - reserved``, so that
``reserved`` posts always stay free for a reply to a person, and keeps the platform's interval
after any post. A reply may use the whole minute and keeps the interval only after another
reply, while the channel's minute stays within the platform's own pace (``60 /
min_interval_s`` posts); past that it keeps the interval after any post, as narration does.

A reply that waits longer than replies alone would have made it wait is **held behind
narration**; ``OutboxPump`` counts those (``PumpStats.held``), and ``bottown bench chat`` prints
them. The clock is injected for tests.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

WINDOW_S = 60.0
REPLY_SHARE = 0.25  # of a channel's minute, kept free for replies to people


@dataclass
class _Channel:
    posts: deque[tuple[float, bool]] = field(default_factory=deque)  # (when, a reply?)
    last_post: float | None = None
    last_reply: float | None = None


def reserved_for_replies(per_minute: int, share: float = REPLY_SHARE) -> int:
    """Posts of a minute narration leaves to replies: ``share`` of it, at least one, and never
    the whole (a channel of one post a minute keeps it for narration too)."""
    if per_minute <= 1:
        return 0
    return min(per_minute - 1, max(1, math.ceil(per_minute * share)))


class ChannelAllowance:
    def __init__(
        self,
        per_minute: int,
        min_interval_s: float,
        *,
        reply_share: float = REPLY_SHARE,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_minute < 0:
            raise ValueError("messages per minute cannot be negative")
        if not 0 <= reply_share < 1:
            raise ValueError("the replies' share of a channel's minute is from 0 to under 1")
        self.per_minute = per_minute
        self.min_interval_s = max(0.0, min_interval_s)
        self.reserved = reserved_for_replies(per_minute, reply_share)
        self.window_s = window_s
        self.clock = clock
        # the platform's own pace as posts a minute (0: none), the most a minute may hold
        # before a reply, too, keeps the interval after any post
        self.platform_per_minute = (
            int(window_s / self.min_interval_s) if self.min_interval_s > 0 else 0
        )
        self._channels: dict[str, _Channel] = {}

    def room(self, area: str, *, reply: bool) -> int | None:
        """Posts of this kind the channel may take now by the minute (``None``: no limit)."""
        if self.per_minute == 0:
            return None
        cap = self.per_minute if reply else self.per_minute - self.reserved
        return max(0, cap - len(self._recent(area)))

    def wait(self, area: str, *, reply: bool) -> float:
        """Seconds before the channel may take a post of this kind (0: now)."""
        return self._wait(area, reply=reply, only_replies=False)

    def held_by_narration(self, area: str) -> bool:
        """Whether a reply now must wait longer than replies alone would make it wait."""
        return self._wait(area, reply=True, only_replies=False) > self._wait(
            area, reply=True, only_replies=True
        )

    def note(self, area: str, *, reply: bool) -> None:
        """A post of this kind went (or was attempted) now."""
        now = self.clock()
        channel = self._channel(area)
        self._recent(area).append((now, reply))
        channel.last_post = now
        if reply:
            channel.last_reply = now

    # -- internals ------------------------------------------------------------------------

    def _wait(self, area: str, *, reply: bool, only_replies: bool) -> float:
        now = self.clock()
        channel = self._channel(area)
        posts = [at for at, was_reply in self._recent(area) if was_reply or not only_replies]
        after = channel.last_reply if only_replies else channel.last_post
        if reply and not only_replies and not self._beyond_platform_pace(area):
            after = channel.last_reply  # a reply need not keep the interval after narration
        wait = 0.0 if after is None else after + self.min_interval_s - now
        if self.per_minute:
            cap = self.per_minute if reply else self.per_minute - self.reserved
            if cap <= 0:
                return math.inf
            if len(posts) >= cap:
                wait = max(wait, posts[len(posts) - cap] + self.window_s - now)
        return max(0.0, wait)

    def _beyond_platform_pace(self, area: str) -> bool:
        return bool(self.platform_per_minute) and (
            len(self._recent(area)) >= self.platform_per_minute
        )

    def _channel(self, area: str) -> _Channel:
        return self._channels.setdefault(area, _Channel())

    def _recent(self, area: str) -> deque[tuple[float, bool]]:
        posts = self._channel(area).posts
        now = self.clock()
        while posts and now - posts[0][0] >= self.window_s:
            posts.popleft()
        return posts

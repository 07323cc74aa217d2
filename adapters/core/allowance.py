"""A channel's allowance: how many posts it may take in a minute, how far apart, and the share of
it kept free for replies to people.

Two limits meet in a channel: ours (``BOTTOWN_CHANNEL_MESSAGES_PER_MINUTE``, a sliding minute;
0: none) and the platform's (``Platform.min_interval_s`` between two posts, Discord's 2.5 s
keeping a webhook at 24 of its 30 posts a minute).

- Narration (the town's lines, residents' talk among themselves, digests) counts every post of
  the minute against ours and leaves free as many as replies took in the last minute, and at
  least ``reserved`` (a quarter). It goes no faster than its share spread evenly (20 a minute:
  one narration post every 4 s), so it never spends the minute in a burst before people write,
  and keeps the platform's interval after any post.
- A reply to a person counts only replies against ours, so what narration took never holds it
  up; it keeps the platform's pace (its interval and ``60 / min_interval_s`` posts a minute)
  only once the channel's minute holds that many posts of any kind. A busy minute may so carry
  more posts than ours, by narration posted before the replies came, never more than the
  platform's pace; the Discord poster also spaces all posts 0.5 s apart server-wide.

A reply that waits longer than replies alone would have made it wait is **held behind
narration** (only the platform's own limit can do that); ``OutboxPump`` counts those
(``PumpStats.held``), and ``bottown bench chat`` prints them. The clock is injected for tests.
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
    last_told: float | None = None  # the last narration post


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
        # narration's share of the minute, spread evenly
        self.narration_gap_s = (
            window_s / (per_minute - self.reserved) if per_minute > self.reserved else 0.0
        )
        self._channels: dict[str, _Channel] = {}

    def room(self, area: str, *, reply: bool) -> int | None:
        """Posts of this kind the channel may take now by the minute (``None``: no limit)."""
        if self.per_minute == 0:
            return None
        recent = self._recent(area)
        counted = sum(1 for _, was_reply in recent if was_reply) if reply else len(recent)
        return max(0, self._cap(area, reply=reply) - counted)

    def fits(self, area: str, within_s: float) -> int | None:
        """Narration posts the channel can take, one after another, before ``within_s`` seconds
        from now have passed, never more than narration's share of the minute for that long
        (so a tick does not spend the next one's): ``None`` for no limit; at least one if the
        first goes in time."""
        first = self.wait(area, reply=False)
        if first >= within_s:
            return 0
        spacing = max(self.narration_gap_s, self.min_interval_s)
        in_time = max(1, math.ceil((within_s - first) / spacing)) if spacing > 0 else None
        room = self.room(area, reply=False)
        if room is None:
            return in_time
        share = max(1, math.floor(within_s / self.window_s * self._cap(area, reply=False)))
        return min(room, share) if in_time is None else min(room, share, in_time)

    def kept(self, area: str) -> int:
        """Posts of the minute narration leaves free now: as many as replies took in the last
        minute, and at least ``reserved``."""
        replies = sum(1 for _, was_reply in self._recent(area) if was_reply)
        return max(self.reserved, replies)

    def wait(self, area: str, *, reply: bool) -> float:
        """Seconds before the channel may take a post of this kind (0: now)."""
        return self._wait(area, self.clock(), reply=reply, only_replies=False)

    def held_by_narration(self, area: str) -> bool:
        """Whether a reply now must wait longer than replies alone would make it wait."""
        now = self.clock()
        return self._wait(area, now, reply=True, only_replies=False) > self._wait(
            area, now, reply=True, only_replies=True
        )

    def note(self, area: str, *, reply: bool) -> None:
        """A post of this kind went (or was attempted) now."""
        now = self.clock()
        channel = self._channel(area)
        self._recent(area).append((now, reply))
        channel.last_post = now
        if not reply:
            channel.last_told = now

    # -- internals ------------------------------------------------------------------------

    def _wait(self, area: str, now: float, *, reply: bool, only_replies: bool) -> float:
        channel = self._channel(area)
        recent = self._recent(area)
        replies = [at for at, was_reply in recent if was_reply]
        every = replies if only_replies else [at for at, _ in recent]
        if reply:
            return self._reply_wait(every, replies, now)
        wait = 0.0 if channel.last_post is None else channel.last_post + self.min_interval_s - now
        if channel.last_told is not None:
            wait = max(wait, channel.last_told + self.narration_gap_s - now)
        if self.per_minute:
            wait = max(wait, self._minute_wait(every, max(1, self._cap(area, reply=False)), now))
        return max(0.0, wait)

    def _reply_wait(self, posts: list[float], replies: list[float], now: float) -> float:
        """A reply waits for the platform's pace over ``posts`` (the interval after the last
        and the platform's minute, once the minute holds that many) and for ours over the
        ``replies`` alone."""
        wait = 0.0
        if self.platform_per_minute and len(posts) >= self.platform_per_minute:
            wait = max(posts[-1] + self.min_interval_s - now, 0.0)
            wait = max(wait, self._minute_wait(posts, self.platform_per_minute, now))
        if self.per_minute:
            wait = max(wait, self._minute_wait(replies, self.per_minute, now))
        return max(0.0, wait)

    def _minute_wait(self, posts: list[float], cap: int, now: float) -> float:
        if len(posts) < cap:
            return 0.0
        return posts[len(posts) - cap] + self.window_s - now

    def _cap(self, area: str, *, reply: bool) -> int:
        return self.per_minute if reply else self.per_minute - self.kept(area)

    def _beyond_platform_pace(self, posts: int) -> bool:
        return bool(self.platform_per_minute) and posts >= self.platform_per_minute

    def _channel(self, area: str) -> _Channel:
        return self._channels.setdefault(area, _Channel())

    def _recent(self, area: str) -> deque[tuple[float, bool]]:
        posts = self._channel(area).posts
        now = self.clock()
        while posts and now - posts[0][0] >= self.window_s:
            posts.popleft()
        return posts

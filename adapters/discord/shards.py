"""Which gateway shards a process holds, and the limits Discord puts on starting their sessions.

A bot in many servers splits its gateway into shards: shard ``i`` of ``n`` carries the servers
whose ``(guild_id >> 22) % n`` is ``i``, and Discord closes an unsharded session past 2,500
servers (4011). ``GET /gateway/bot`` says how many shards Discord recommends and its
``session_start_limit``: the sessions the bot may still start today (``remaining``; one more and
Discord resets the token) and how many may identify together (``max_concurrency``: shards whose
``shard_id % max_concurrency`` differ may identify in the same 5 seconds; one key, once in 5 s).
``IdentifyPacer`` keeps that pace for the shards of this process; ``check_start_limit`` refuses
to start more sessions than remain.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from discord.shard import SessionStartLimits

IDENTIFY_WINDOW_S = 5.0  # one IDENTIFY per rate-limit key in this many seconds


@dataclass(frozen=True)
class ShardSet:
    """The shards a process holds: ``ids`` of ``count`` (None, None: all, as Discord
    recommends)."""

    ids: tuple[int, ...] | None = None
    count: int | None = None

    @classmethod
    def parse(cls, shards: str | None, count: int | None) -> ShardSet:
        """``--shards 0-3 --shard-count 8`` (ranges and single ids, comma separated)."""
        if shards is None:
            if count is not None:
                raise ValueError("--shard-count needs --shards (which of them this process holds)")
            return cls()
        if count is None or count < 1:
            raise ValueError("--shards needs --shard-count (how many shards the bot has in all)")
        ids: set[int] = set()
        for part in shards.split(","):
            low, _, high = part.strip().partition("-")
            try:
                first, last = int(low), int(high or low)
            except ValueError:
                raise ValueError(f"--shards {shards!r}: write ids and ranges, as 0-3,6") from None
            ids.update(range(first, last + 1))
        if not ids or min(ids) < 0 or max(ids) >= count:
            raise ValueError(f"--shards {shards!r}: each id from 0 to {count - 1}")
        return cls(tuple(sorted(ids)), count)

    def sessions(self, recommended: int) -> int:
        """How many sessions starting this process takes."""
        if self.ids is not None:
            return len(self.ids)
        return self.count or recommended

    def __str__(self) -> str:
        if self.ids is None:
            return "every shard"
        return f"shards {', '.join(map(str, self.ids))} of {self.count}"


EVERY_SHARD = ShardSet()


def check_start_limit(limits: SessionStartLimits, needed: int) -> None:
    """Refuse to start more sessions than Discord allows today (one past them and Discord
    resets the bot's token)."""
    if limits.remaining < needed:
        hours = limits.reset_after / 3_600_000
        raise RuntimeError(
            f"Discord allows {limits.remaining} more gateway session starts today (of "
            f"{limits.total}; the count resets in {hours:.1f} h) and this process needs "
            f"{needed}: wait, or start fewer shards here"
        )


@dataclass
class IdentifyPacer:
    """Waits before each IDENTIFY until its rate-limit key (``shard_id % max_concurrency``)
    last identified ``IDENTIFY_WINDOW_S`` ago, on ``clock``."""

    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    max_concurrency: int = 1
    last: dict[int, float] = field(default_factory=dict)  # key -> its last IDENTIFY
    waited: float = 0.0  # seconds waited in all (the gateway's metrics)

    async def before(self, shard_id: int | None) -> None:
        key = (shard_id or 0) % max(1, self.max_concurrency)
        if key in self.last:
            wait = self.last[key] + IDENTIFY_WINDOW_S - self.clock()
            if wait > 0:
                self.waited += wait
                await self.sleep(wait)
        self.last[key] = self.clock()

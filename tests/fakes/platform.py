"""A chat platform that records what the outbox pump sends, and the pump's sleep, instant."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from adapters.core.ports import DeliveryError, Outgoing
from standins.clock import Clock

__all__ = ["Clock", "FakePlatform", "Sleeps"]


@dataclass
class FakePlatform:
    name: str = "fake"
    max_chars: int = 2000
    min_interval_s: float = 0.0
    sent: list[Outgoing] = field(default_factory=list)
    failures: list[DeliveryError] = field(default_factory=list)  # raised first, in order
    broken: DeliveryError | None = None  # raised by every send while set (a revoked token)
    tries: int = 0

    async def send(self, message: Outgoing) -> str:
        await asyncio.sleep(0)
        self.tries += 1
        if self.broken is not None:
            raise self.broken
        if self.failures:
            raise self.failures.pop(0)
        self.sent.append(message)
        return f"m{len(self.sent)}"


class Sleeps:
    """The pump's sleep, instant: records how long it was asked to wait, and moves ``clock``
    on by as much if it has one."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.waits: list[float] = []
        self.clock = clock

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.clock is not None and seconds > 0:
            self.clock.now += seconds
        await asyncio.sleep(0)

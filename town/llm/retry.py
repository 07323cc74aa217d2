"""When to try a request again, and how long to wait first."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts per request, and the waits between them.

    Server errors, timeouts and lost connections wait with exponential backoff and full jitter:
    a uniform draw in ``[0, min(max_delay_s, base_delay_s * 2 ** (attempt - 1))]``. A 429 waits
    what its ``retry-after-ms`` / ``retry-after`` header asks, capped at ``max_retry_after_s``.
    """

    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_retry_after_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_delay_s < 0 or self.max_delay_s < 0 or self.max_retry_after_s < 0:
            raise ValueError("delays must not be negative")

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """The wait after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2 ** max(0, attempt - 1))
        return rng.uniform(0.0, ceiling)

    def retry_after(
        self, headers: Mapping[str, str], now: Callable[[], float] = time.time
    ) -> float | None:
        """The wait a 429 asks for, capped; ``None`` when the headers do not say."""
        wait = _header_wait(headers, now)
        return None if wait is None else min(max(wait, 0.0), self.max_retry_after_s)


def _header_wait(headers: Mapping[str, str], now: Callable[[], float]) -> float | None:
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return float(millis) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(value).timestamp() - now()
    except (TypeError, ValueError):
        return None

"""LLM usage in the store (per town, wall-clock day, task and resident) and the daily budget of
tokens and calls."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, date, datetime

from sqlalchemy import func
from sqlmodel import select

from town.store.db import Store
from town.store.models import LlmUsage
from town.text import NAME_LIMIT


def today_utc() -> date:
    return datetime.now(UTC).date()


class StoredUsage:
    """A ``UsageRecorder`` for the gateway: calls are tallied in memory and written by ``flush``.

    Recording never touches the database, so an LLM call finishing in the middle of a tick's
    transaction never waits for a second writer; the engine flushes after each commit and the
    commands flush before they exit. ``tokens_today`` counts the unflushed calls too.

    The day's stored totals are read at most every ``refresh_s`` seconds (the budget asks before
    every LLM call); a flush makes the next reading fresh, and another process's calls on the
    same town (a shell command) show within ``refresh_s``.
    """

    def __init__(
        self,
        store: Store,
        town_id: int | None,
        today: Callable[[], date] = today_utc,
        *,
        refresh_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.town_id = town_id
        self.today = today
        self.refresh_s = refresh_s
        self.clock = clock
        self._pending: dict[tuple[date, str, str], list[int]] = {}
        self._stored: tuple[date, float, int, int] | None = None  # day, read at, calls, tokens
        # one flush at a time: visitors' answers are stored by threads at once, and two that
        # both found no row for a task would both insert it
        self._flushing = threading.Lock()

    def record(
        self,
        task: str,
        resident: str | None,
        calls: int,
        prompt_tokens: int,
        completion_tokens: int,
        fallback: bool,
    ) -> None:
        key = (self.today(), task, (resident or "")[:NAME_LIMIT])
        row = self._pending.setdefault(key, [0, 0, 0, 0])
        row[0] += calls
        row[1] += prompt_tokens
        row[2] += completion_tokens
        row[3] += int(fallback)

    def founded(self, town_id: int) -> None:
        """The town whose founding this tally counted has its id now: its calls are its own."""
        self.town_id = town_id
        self._stored = None

    def flush(self) -> None:
        """Add the tallied calls to the usage rows in one transaction (kept in memory while the
        town is being founded, until :meth:`founded`)."""
        if not self._pending or self.town_id is None:
            return
        with self._flushing:
            pending, self._pending = self._pending, {}
            self._stored = None  # read the totals afresh after this write
            self._add(self.town_id, pending)

    def _add(self, town_id: int, pending: dict[tuple[date, str, str], list[int]]) -> None:
        with self.store.session() as s:
            for (day, task, resident), (calls, prompt, completion, fallbacks) in pending.items():
                row = s.exec(
                    select(LlmUsage).where(
                        LlmUsage.town_id == town_id,
                        LlmUsage.day == day,
                        LlmUsage.task == task,
                        LlmUsage.resident == resident,
                    )
                ).first()
                if row is None:
                    row = LlmUsage(town_id=town_id, day=day, task=task, resident=resident)
                row.calls += calls
                row.prompt_tokens += prompt
                row.completion_tokens += completion
                row.fallbacks += fallbacks
                s.add(row)

    def totals_today(self) -> tuple[int, int]:
        """(calls, tokens) today, flushed or not."""
        by_task = self.by_task_today().values()
        return sum(c for c, _ in by_task), sum(t for _, t in by_task)

    def spent_today(self) -> tuple[int, int]:
        """(calls, tokens) today, flushed or not; the stored part read at most every
        ``refresh_s`` seconds."""
        day, now = self.today(), self.clock()
        stored = self._stored
        if self.town_id is None:
            stored = (day, now, 0, 0)  # a town being founded has nothing stored yet
        elif stored is None or stored[0] != day or now - stored[1] >= self.refresh_s:
            with self.store.session() as s:
                calls, tokens = s.exec(
                    select(
                        func.sum(LlmUsage.calls),
                        func.sum(LlmUsage.prompt_tokens + LlmUsage.completion_tokens),
                    ).where(LlmUsage.town_id == self.town_id, LlmUsage.day == day)
                ).one()
            stored = self._stored = (day, now, int(calls or 0), int(tokens or 0))
        pending = [v for (d, _, _), v in self._pending.items() if d == day]
        return (
            stored[2] + sum(v[0] for v in pending),
            stored[3] + sum(v[1] + v[2] for v in pending),
        )

    def tokens_today(self) -> int:
        return self.spent_today()[1]

    def calls_today(self) -> int:
        return self.spent_today()[0]

    def spent_by_task(self) -> dict[str, tuple[int, int, int]]:
        """task -> (calls, prompt tokens, completion tokens) on every day, flushed or not: the
        town's totals, which only grow (``/metrics``)."""
        with self.store.session() as s:
            rows = s.exec(
                select(
                    LlmUsage.task,
                    func.sum(LlmUsage.calls),
                    func.sum(LlmUsage.prompt_tokens),
                    func.sum(LlmUsage.completion_tokens),
                )
                .where(LlmUsage.town_id == self.town_id)
                .group_by(LlmUsage.task)
            ).all()
        out = {task: (int(c or 0), int(p or 0), int(t or 0)) for task, c, p, t in rows}
        for (_, task, _), (calls, prompt, completion, _f) in list(self._pending.items()):
            c, p, t = out.get(task, (0, 0, 0))
            out[task] = (c + calls, p + prompt, t + completion)
        return out

    def by_task_today(self) -> dict[str, tuple[int, int]]:
        """task -> (calls, tokens) for today, flushed or not."""
        day = self.today()
        with self.store.session() as s:
            rows = s.exec(
                select(
                    LlmUsage.task,
                    func.sum(LlmUsage.calls),
                    func.sum(LlmUsage.prompt_tokens + LlmUsage.completion_tokens),
                )
                .where(LlmUsage.town_id == self.town_id, LlmUsage.day == day)
                .group_by(LlmUsage.task)
            ).all()
        out = {task: (int(calls or 0), int(tokens or 0)) for task, calls, tokens in rows}
        for (d, task, _), (calls, prompt, completion, _f) in self._pending.items():
            if d == day:
                c, t = out.get(task, (0, 0))
                out[task] = (c + calls, t + prompt + completion)
        return out


class DailyTokenBudget:
    """A town's LLM allowance for one wall-clock (UTC) day: ``limit_tokens`` tokens and
    ``limit_calls`` calls (requests, retries included). It is spent once either is reached, and
    then the gateway lets the offline brain answer until midnight UTC. A limit of 0 never runs
    out."""

    def __init__(self, usage: StoredUsage, limit_tokens: int, limit_calls: int = 0) -> None:
        self.usage = usage
        self.limit_tokens = limit_tokens
        self.limit_calls = limit_calls

    def exhausted(self) -> bool:
        return self.spent_reason() is not None

    def spent_reason(self) -> str | None:
        """Which limit is reached, e.g. ``"500 of 500 calls today"``; None while any is left."""
        if self.limit_tokens <= 0 and self.limit_calls <= 0:
            return None
        calls, tokens = self.usage.spent_today()
        if self.limit_calls > 0 and calls >= self.limit_calls:
            return f"{calls:,} of {self.limit_calls:,} calls today"
        if self.limit_tokens > 0 and tokens >= self.limit_tokens:
            return f"{tokens:,} of {self.limit_tokens:,} tokens today"
        return None

    def left(self) -> int | None:
        """Tokens left today (None: no token limit)."""
        if self.limit_tokens <= 0:
            return None
        return max(0, self.limit_tokens - self.usage.tokens_today())

    def calls_left(self) -> int | None:
        """Calls left today (None: no call limit)."""
        if self.limit_calls <= 0:
            return None
        return max(0, self.limit_calls - self.usage.calls_today())

    def describe(self) -> str:
        """One line for ``status``: what is left today, or which limit is spent and until when."""
        reason = self.spent_reason()
        if reason is not None:
            return f"Budget spent ({reason}): the offline brain answers until 00:00 UTC"
        parts = []
        tokens, calls = self.left(), self.calls_left()
        if tokens is not None:
            parts.append(f"{tokens:,} tokens")
        if calls is not None:
            parts.append(f"{calls:,} calls")
        return f"Budget left: {', '.join(parts)}" if parts else "Budget: no daily limit"

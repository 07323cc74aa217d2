"""LLM usage in the store (per town, wall-clock day, task and resident) and the daily budget."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime

from sqlalchemy import func
from sqlmodel import select

from town.store.db import Store
from town.store.models import LlmUsage


def today_utc() -> date:
    return datetime.now(UTC).date()


class StoredUsage:
    """A ``UsageRecorder`` for the gateway: calls are tallied in memory and written by ``flush``.

    Recording never touches the database, so an LLM call finishing in the middle of a tick's
    transaction never waits for a second writer; the engine flushes after each commit and the
    commands flush before they exit. ``tokens_today`` counts the unflushed calls too.
    """

    def __init__(self, store: Store, town_id: int, today: Callable[[], date] = today_utc) -> None:
        self.store = store
        self.town_id = town_id
        self.today = today
        self._pending: dict[tuple[date, str, str], list[int]] = {}

    def record(
        self,
        task: str,
        resident: str | None,
        calls: int,
        prompt_tokens: int,
        completion_tokens: int,
        fallback: bool,
    ) -> None:
        key = (self.today(), task, (resident or "")[:80])
        row = self._pending.setdefault(key, [0, 0, 0, 0])
        row[0] += calls
        row[1] += prompt_tokens
        row[2] += completion_tokens
        row[3] += int(fallback)

    def flush(self) -> None:
        """Add the tallied calls to the usage rows in one transaction."""
        if not self._pending:
            return
        pending, self._pending = self._pending, {}
        with self.store.session() as s:
            for (day, task, resident), (calls, prompt, completion, fallbacks) in pending.items():
                row = s.exec(
                    select(LlmUsage).where(
                        LlmUsage.town_id == self.town_id,
                        LlmUsage.day == day,
                        LlmUsage.task == task,
                        LlmUsage.resident == resident,
                    )
                ).first()
                if row is None:
                    row = LlmUsage(town_id=self.town_id, day=day, task=task, resident=resident)
                row.calls += calls
                row.prompt_tokens += prompt
                row.completion_tokens += completion
                row.fallbacks += fallbacks
                s.add(row)

    def totals_today(self) -> tuple[int, int]:
        """(calls, tokens) today, flushed or not."""
        by_task = self.by_task_today().values()
        return sum(c for c, _ in by_task), sum(t for _, t in by_task)

    def _pending_tokens(self, day: date) -> int:
        return sum(v[1] + v[2] for (d, _, _), v in self._pending.items() if d == day)

    def tokens_today(self) -> int:
        day = self.today()
        with self.store.session() as s:
            total = s.exec(
                select(func.sum(LlmUsage.prompt_tokens + LlmUsage.completion_tokens)).where(
                    LlmUsage.town_id == self.town_id, LlmUsage.day == day
                )
            ).one()
        return int(total or 0) + self._pending_tokens(day)

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
    """Spent once the town's tokens today reach the limit; a limit of 0 never runs out."""

    def __init__(self, usage: StoredUsage, limit_tokens: int) -> None:
        self.usage = usage
        self.limit_tokens = limit_tokens

    def exhausted(self) -> bool:
        return self.limit_tokens > 0 and self.usage.tokens_today() >= self.limit_tokens

    def left(self) -> int | None:
        if self.limit_tokens <= 0:
            return None
        return max(0, self.limit_tokens - self.usage.tokens_today())

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
    """A ``UsageRecorder`` for the gateway that adds each call to the town's usage rows."""

    def __init__(self, store: Store, town_id: int, today: Callable[[], date] = today_utc) -> None:
        self.store = store
        self.town_id = town_id
        self.today = today

    def record(
        self,
        task: str,
        resident: str | None,
        calls: int,
        prompt_tokens: int,
        completion_tokens: int,
        fallback: bool,
    ) -> None:
        key = (self.town_id, self.today(), task, (resident or "")[:80])
        with self.store.session() as s:
            row = s.exec(
                select(LlmUsage).where(
                    LlmUsage.town_id == key[0],
                    LlmUsage.day == key[1],
                    LlmUsage.task == key[2],
                    LlmUsage.resident == key[3],
                )
            ).first()
            if row is None:
                row = LlmUsage(town_id=key[0], day=key[1], task=key[2], resident=key[3])
            row.calls += calls
            row.prompt_tokens += prompt_tokens
            row.completion_tokens += completion_tokens
            row.fallbacks += int(fallback)
            s.add(row)

    def tokens_today(self) -> int:
        with self.store.session() as s:
            total = s.exec(
                select(func.sum(LlmUsage.prompt_tokens + LlmUsage.completion_tokens)).where(
                    LlmUsage.town_id == self.town_id, LlmUsage.day == self.today()
                )
            ).one()
        return int(total or 0)

    def by_task_today(self) -> dict[str, tuple[int, int]]:
        """task -> (calls, tokens) for today."""
        with self.store.session() as s:
            rows = s.exec(
                select(
                    LlmUsage.task,
                    func.sum(LlmUsage.calls),
                    func.sum(LlmUsage.prompt_tokens + LlmUsage.completion_tokens),
                )
                .where(LlmUsage.town_id == self.town_id, LlmUsage.day == self.today())
                .group_by(LlmUsage.task)
            ).all()
        return {task: (int(calls or 0), int(tokens or 0)) for task, calls, tokens in rows}


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

"""How the brain is doing: answers by the model and by the fallback, by task and reason, by day."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

from town.llm.made import PACE

WARN_SHARE = 0.05
"""A day on which more than this share of answers came from the fallback gets a warning."""
WARN_AFTER = 20
"""Answers in a day before the log warns about the share (a first fallback is not 100%)."""


def said_together(named: list[str]) -> str:
    """Words, each once, joined as a person would ("a, b and c")."""
    named = list(dict.fromkeys(named))
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"


def _today() -> date:
    return datetime.now(UTC).date()


class AnswerReport:
    """Every answer the gateway gave, counted by day, task and who answered (the model, or the
    fallback and why)."""

    def __init__(self, today: Callable[[], date] = _today) -> None:
        self.today = today
        self.model: Counter[tuple[date, str]] = Counter()
        self.fallback: Counter[tuple[date, str, str]] = Counter()
        self.prompt_tokens: Counter[date] = Counter()
        self.cached_tokens: Counter[date] = Counter()  # held by the server's prefix cache
        self.ticks: Counter[date] = Counter()
        self._warned: date | None = None
        self._words: dict[str, str] = {}  # a task's name -> the task as a member calls it

    def prompted(self, prompt_tokens: int, cached_tokens: int) -> None:
        """A thought's prompt tokens, and how many of them the server's prefix cache held."""
        day = self.today()
        self.prompt_tokens[day] += prompt_tokens
        self.cached_tokens[day] += cached_tokens

    def cached_share(self, day: date | None = None) -> float | None:
        """The share of prompt tokens the server's cache held (None: no cache reported)."""
        days = [d for d in self.prompt_tokens if day is None or d == day]
        cached = sum(self.cached_tokens[d] for d in days)
        prompt = sum(self.prompt_tokens[d] for d in days)
        return cached / prompt if cached and prompt else None

    def ticked(self) -> None:
        """A tick of the town went by (calls a tick wants: :meth:`wanted_per_tick`)."""
        self.ticks[self.today()] += 1

    def wanted_per_tick(self) -> float | None:
        """Today's calls a tick wanted of the model: those it made and those answered offline
        to keep the pace (None before a tick)."""
        day = self.today()
        if not self.ticks[day]:
            return None
        model, fallback = self._days(day)
        kept = sum(c[PACE] for c in fallback.values())
        return (sum(model.values()) + kept) / self.ticks[day]

    def answered(self, task: str, fallback_reason: str | None, words: str = "") -> None:
        """An answer to ``task`` (by the model, else the fallback's reason); ``words``: the task
        as a member calls it."""
        if words:
            self._words[task] = words
        if fallback_reason is None:
            self.model[(self.today(), task)] += 1
        else:
            self.fallback[(self.today(), task, fallback_reason)] += 1

    def _days(self, day: date | None) -> tuple[Counter[str], dict[str, Counter[str]]]:
        model: Counter[str] = Counter()
        fallback: dict[str, Counter[str]] = {}
        for (d, task), n in self.model.items():
            if day is None or d == day:
                model[task] += n
        for (d, task, reason), n in self.fallback.items():
            if day is None or d == day:
                fallback.setdefault(task, Counter())[reason] += n
        return model, fallback

    def _counts(self, day: date | None) -> tuple[int, int]:
        """Answers by the model and by the fallback (of ``day``; None: all days)."""
        model, fallback = self._days(day)
        return sum(model.values()), sum(sum(c.values()) for c in fallback.values())

    def share(self, day: date | None = None) -> float:
        """Answers by the fallback over all answers (of ``day``; None: all days)."""
        by_model, back = self._counts(day)
        return back / (by_model + back) if back else 0.0

    def as_json(self, day: date | None = None) -> dict[str, Any]:
        model, fallback = self._days(day)
        tasks = sorted(set(model) | set(fallback))
        cached = self.cached_share(day)
        return {
            "fallback_share": round(self.share(day), 4),
            "cached_prompt_share": None if cached is None else round(cached, 4),
            "fallbacks_by_task": {t: dict(sorted(fallback[t].items())) for t in sorted(fallback)},
            "tasks_in_words": {t: self.in_words(t) for t in tasks},
            "answers_by_task": {
                t: {"model": model[t], "fallback": sum(fallback.get(t, Counter()).values())}
                for t in tasks
            },
        }

    def lines(self, day: date | None = None) -> list[str]:
        """One line per task: answers by the model and by the fallback, with the reasons."""
        model, fallback = self._days(day)
        out = []
        for task in sorted(set(model) | set(fallback)):
            reasons = fallback.get(task, Counter())
            line = f"{task}: {model[task]} by the model, {sum(reasons.values())} by the fallback"
            if reasons:
                line += " (" + ", ".join(f"{r} {n}" for r, n in reasons.most_common()) + ")"
            out.append(line)
        return out

    def warn_once(self) -> str | None:
        """The warning, the first time in a day it holds after :data:`WARN_AFTER` answers."""
        day = self.today()
        if self._warned == day:
            return None
        found = self.warning() if sum(self._counts(day)) >= WARN_AFTER else None
        if found is not None:
            self._warned = day
        return found

    def in_words(self, task: str) -> str:
        """``task`` as a member calls it (as the task says, else its name spaced)."""
        return self._words.get(task, task.replace("_", " "))

    def offline_for_pace(self) -> dict[str, int]:
        """Today's answers given offline to keep the town's pace, by task (most first)."""
        day = self.today()
        found: Counter[str] = Counter()
        for (d, task, reason), n in self.fallback.items():
            if d == day and reason == PACE:
                found[task] += n
        return dict(found.most_common())

    def status_lines(self) -> list[str]:
        """For ``status`` and ``simulate``: today's answers, the fallback's share and reasons."""
        day = self.today()
        _model, fallback = self._days(day)
        by_model, back = self._counts(day)
        if not back and not by_model:
            return []
        lines = [
            f"LLM answers today: {by_model:,} by the model, {back:,} by the offline "
            f"fallback ({self.share(day):.1%})"
        ]
        for task in sorted(fallback):
            reasons = ", ".join(f"{r} {n}" for r, n in fallback[task].most_common())
            lines.append(f"  fallback {self.in_words(task)} ({task}): {reasons}")
        if (cached := self.cached_share(day)) is not None:
            lines.append(f"LLM prompt tokens held by the server's cache today: {cached:.0%}")
        warning = self.warning()
        return [*lines, warning] if warning else lines

    def warning(self) -> str | None:
        """A warning when more than 5% of today's answers came from the fallback."""
        share = self.share(self.today())
        if share <= WARN_SHARE:
            return None
        return (
            f"warning: {share:.0%} of today's LLM answers came from the offline fallback "
            f"(over {WARN_SHARE:.0%}); see the reasons by task"
        )

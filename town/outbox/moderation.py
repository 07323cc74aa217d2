"""Output moderation: every line a resident speaks, and the plans, reactions and object states
the channels narrate, pass a word list (the town folder's ``blocklist.txt`` and
``BOTTOWN_BLOCKLIST``) and, when configured, an OpenAI-compatible ``/moderations`` endpoint
(``town.llm.moderation``),
before they can enter the outbox. A flagged result is never posted: the offline brain's answer
for that moment is, and the audit log records the flag and its category, never the text.

``ModeratedBrain`` wraps the brain, so the check sits where those words are made (``utter`` for
a tick's conversation and an answer to a visitor alike, ``react``, ``decompose``, ...), after
the LLM call and outside any transaction or lock."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from town.llm import made
from town.llm.moderation import PASSED, Verdict
from town.llm.port import Brain, OfflineBrain
from town.llm.task import Task
from town.outbox import audit
from town.store.db import Store
from town.store.models import Town
from town.text import clean_text

log = logging.getLogger(__name__)

I = TypeVar("I", bound=BaseModel)  # noqa: E741 - as town.llm.port
R = TypeVar("R", bound=BaseModel)
# tasks whose results the channels show: speech (utter), reactions and plans (narration), an
# object's new state
POSTED_TASKS = frozenset({"utter", "react", "decompose", "plan_day", "object_state"})
MODERATED = "moderated"  # the audit kind of a flagged line


Check = Callable[[str], Awaitable[Verdict]]


def read_blocklist(lines: Iterable[str]) -> list[str]:
    """Words and phrases, one a line or comma-separated; ``#`` starts a comment."""
    words: list[str] = []
    for line in lines:
        for part in line.split("#", 1)[0].split(","):
            if part.strip():
                words.append(" ".join(part.split()).casefold())
    return words


class Blocklist:
    """Whole words or phrases, in any case."""

    def __init__(self, words: Sequence[str]) -> None:
        self.words = sorted(set(words))
        parts = [r"(?<!\w)" + re.escape(w).replace(r"\ ", r"\s+") + r"(?!\w)" for w in self.words]
        self._pattern = re.compile("|".join(parts), re.IGNORECASE) if parts else None

    async def __call__(self, text: str) -> Verdict:
        if self._pattern is not None and self._pattern.search(text):
            return Verdict(True, "blocklist")
        return PASSED


class ModeratedBrain:
    """A brain whose residents' spoken lines pass ``checks``; a flagged line is replaced by the
    offline brain's and the flag audited (in a short write of its own)."""

    def __init__(self, inner: Brain, checks: Sequence[Check], store: Store, town_id: int) -> None:
        self.inner = inner
        self.checks = list(checks)
        self.store = store
        self.town_id = town_id
        self.offline = OfflineBrain()

    @property
    def name(self) -> str:
        return self.inner.name

    async def run(self, task: Task[I, R], inputs: I, *, resident: str | None = None) -> R:
        result = await self.inner.run(task, inputs, resident=resident)
        if task.name not in POSTED_TASKS:
            return result
        verdict = await self.verdict("\n".join(_texts(result.model_dump())))
        if not verdict.flagged:
            return result
        await asyncio.to_thread(self._record, resident or "", verdict, task.name, inputs)
        answer = await self.offline.run(task, inputs, resident=resident)
        return made.stamp(answer, made.offline("moderation"))

    async def verdict(self, text: str) -> Verdict:
        for check in self.checks:
            found = await check(text)
            if found.flagged:
                return found
        return PASSED

    def _record(self, resident: str, verdict: Verdict, task: str, inputs: BaseModel) -> None:
        with self.store.session() as session:
            town = session.get(Town, self.town_id)
            if town is None:
                return
            audit.record(
                session,
                self.town_id,
                audit.OUT,
                MODERATED,
                resident or "town",
                clean_text(f"{task} flagged ({verdict.category}); the offline brain's was used"),
                game_time=town.clock,
                channel=str(getattr(inputs, "location", "") or "").partition(":")[0],
            )


def _texts(value: Any) -> list[str]:
    """Every string in a result's fields, in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []

"""A town taking in what a gateway process heard for it (``town.store.waiting``): a visitor's
words and a reaction, each stored as a ``WaitingInput`` and handled here as the in-process
adapter would have (``TownRuntime.visitor_says``, ``reacted``), in the order they came.

``Doorbell`` is one per process: it wakes the towns it runs the moment an input of theirs is
committed (PostgreSQL's ``LISTEN``, on a thread of its own), or at its next poll (SQLite, every
``poll_s``; on PostgreSQL a slower poll stays as a safety net); ``keep_taking`` is one per town.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from bot.runtime.run import TownRuntime
from town.features.ratings.reactions import Reacted
from town.inputs.visit import EmptyWords, Visit
from town.store import waiting
from town.store.db import Store

log = logging.getLogger(__name__)

WORDS, REACTION = "words", "reaction"
LISTENING_POLL_S = 30.0  # PostgreSQL: a poll beside LISTEN, in case a notification was missed


def words_body(visit: Visit) -> dict[str, Any]:
    return {
        "area": visit.area,
        "name": visit.name,
        "words": visit.spoken.said,
        "platform": visit.platform,
        "user_id": visit.user_id,
        "role": visit.role,
        "replying_to": visit.replying_to,
    }


def reaction_body(reaction: Reacted) -> dict[str, Any]:
    return asdict(reaction)


async def take_in(runtime: TownRuntime) -> int:
    """Every input waiting for the town, handled in order; how many."""
    done = 0
    while rows := await asyncio.to_thread(waiting.take, runtime.store, runtime.town_id):
        for row in rows:
            try:
                await _handle(runtime, row.kind, row.body)
            except EmptyWords:
                pass  # nothing left once cleaned: the gateway's reading should have refused it
            except Exception:  # one bad input must not keep the others out
                log.exception("%s: a waiting %s could not be taken in", runtime.town_name, row.kind)
            done += 1
    return done


async def _handle(runtime: TownRuntime, kind: str, body: dict[str, Any]) -> None:
    if kind == WORDS:
        visit = Visit.of(
            body["area"],
            body["name"],
            body["words"],
            body["platform"],
            body["user_id"],
            role=body["role"],
            replying_to=body["replying_to"],
        )
        await runtime.visitor_says(visit)
    elif kind == REACTION:
        await runtime.reacted(Reacted(**body))
    else:
        log.warning("%s: a waiting input of unknown kind %r", runtime.town_name, kind)


@dataclass
class Doorbell:
    """Wakes the towns of this process whose inputs are waiting."""

    store: Store
    poll_s: float = 1.0
    bells: defaultdict[int, asyncio.Event] = field(
        default_factory=lambda: defaultdict(asyncio.Event)
    )

    def ring(self, town_id: int) -> None:
        if town_id in self.bells:
            self.bells[town_id].set()

    async def run(self) -> None:
        """Until cancelled: LISTEN on PostgreSQL (and a slow poll), a poll on SQLite."""
        if self.store.is_sqlite:
            await self._poll(self.poll_s)
            return
        loop = asyncio.get_running_loop()
        stop = threading.Event()

        def heard(town_id: int) -> None:  # (on the listening thread)
            loop.call_soon_threadsafe(self.ring, town_id)

        listening = asyncio.create_task(self._listen(heard, stop))
        try:
            await self._poll(LISTENING_POLL_S)
        finally:
            stop.set()
            listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listening

    async def _listen(self, heard: Callable[[int], None], stop: threading.Event) -> None:
        """LISTEN again after the database went away (the poll covers the gap)."""
        while not stop.is_set():
            try:
                await asyncio.to_thread(waiting.listen, self.store, heard, stop)
            except Exception as exc:
                log.warning("waiting inputs: not listening (%s); again in %g s", exc, self.poll_s)
                await asyncio.sleep(self.poll_s)

    async def _poll(self, every_s: float) -> None:
        while True:
            try:
                towns = await asyncio.to_thread(waiting.towns_waiting, self.store, list(self.bells))
            except Exception as exc:  # the database out of reach: the next round asks again
                log.warning("waiting inputs: no poll (%s)", exc)
                towns = set()
            for town_id in towns:
                self.ring(town_id)
            await asyncio.sleep(every_s)

    async def keep_taking(self, runtime: TownRuntime) -> None:
        """Take in the town's waiting inputs now and whenever it is rung, until cancelled."""
        bell = self.bells[runtime.town_id]
        try:
            while True:
                bell.clear()
                try:
                    await take_in(runtime)
                except Exception as exc:  # the database out of reach: the next ring tries again
                    log.warning("%s: waiting inputs not taken in (%s)", runtime.town_name, exc)
                await bell.wait()
        finally:
            self.bells.pop(runtime.town_id, None)

"""Outbox delivery: the town's events posted to one platform, in order per channel, at most once.

For each pending event (an outbox row with no delivery row for this platform yet):

1. It is rendered (``adapters.core.text.render``); events not shown in channels are marked skipped,
   and so is a notice meant for another platform (its ``for_platform``).
2. Its delivery row is written as "sending" and committed *before* the post. The unique
   (outbox event, platform) pair makes this a claim: two workers never post the same event, and
   a restart never posts it again. A crash between the claim and the platform's answer leaves
   the row in "sending"; ``recover()`` marks such rows "unknown" and they are not sent again
   (at most once: a missing line is better than a doubled one).
3. Messages longer than the platform's limit are split at sentence ends.
4. Channels are served concurrently, each in order, never faster than the platform's
   ``min_interval_s``. A 429 waits as long as the platform asked; other failures back off
   exponentially with full jitter. After ``max_attempts`` the claim is released, so the event is
   tried again on the next round and nothing is lost.
5. A resident's answer to a visitor is stored first, like every event, then posted at once by
   ``post_now`` (the runtime does, for every platform), claimed like any post and tried once;
   what does not go out then is left to the rounds. A channel's replies to
   visitors (events with ``reply_to``) go out first, one by one, and never in a digest;
   narration that falls behind by more than ``digest_after`` events gets one digest (split if
   long) instead of a flood.
6. At most ``channel_per_minute`` posts go to one channel in any minute (0: no limit). A channel
   at its limit is left for a later round, its events still pending and in order; while it
   waits, its backlog may pass ``digest_after`` and go out as one digest. Only the parts of one
   long message wait inside a round, so one busy channel never holds up the others.
7. A credentials problem (a revoked token, a missing scope or permission: ``DeliveryError``
   with ``credentials``) pauses delivery to that platform: the claim is released, the events
   stay pending, the log says what to fix, and every ``credentials_retry_s`` one channel tries
   again; the first post that goes through resumes delivery everywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sqlalchemy import delete, exists, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from adapters.core.ports import DeliveryError, Outgoing, Platform
from adapters.core.text import render, split_text
from town.inputs.limits import ChannelRate
from town.store.db import Store
from town.store.models import Delivery, OutboxEvent, utcnow

log = logging.getLogger(__name__)

DIGEST_AFTER = 8  # a channel this many events behind gets a digest instead
BATCH = 500  # outbox rows looked at per round


@dataclass(frozen=True)
class Pending:
    outbox_id: int
    key: str
    area: str
    author: str
    text: str
    emoji: str
    clock: str  # "HH:MM" game time, for digests
    reply: bool = False  # a resident's answer to a visitor: first, and never in a digest


@dataclass
class PumpStats:
    sent: int = 0  # platform messages posted
    events: int = 0  # outbox events delivered (a digest delivers several)
    digests: int = 0
    retries: int = 0
    released: int = 0  # claims given back after max_attempts, to be tried again
    deferred: int = 0  # times a channel at its rate limit left its events for a later round


@dataclass
class OutboxPump:
    store: Store
    town_id: int
    platform: Platform
    max_attempts: int = 6
    base_backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    digest_after: int = DIGEST_AFTER
    channel_per_minute: int = 0  # posts per channel per minute; 0: no limit
    credentials_retry_s: float = 60.0  # while paused on a credentials problem, try this often
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    stats: PumpStats = field(default_factory=PumpStats)
    paused: str = ""  # the credentials problem delivery waits on ("" while it flows)
    _last_post: dict[str, float] = field(default_factory=dict)
    _rate: ChannelRate = field(init=False)
    _probe_at: float = 0.0  # while paused: when one channel may try again

    def __post_init__(self) -> None:
        self._rate = ChannelRate(self.channel_per_minute, clock=self.clock)

    def recover(self) -> int:
        """Rows a crash left in "sending" become "unknown" and are never posted again."""
        with self.store.session() as s:
            result = s.execute(
                update(Delivery)
                .where(
                    col(Delivery.platform) == self.platform.name,
                    col(Delivery.status) == "sending",
                    col(Delivery.outbox_id).in_(
                        select(OutboxEvent.id).where(OutboxEvent.town_id == self.town_id)
                    ),
                )
                .values(status="unknown", updated_at=utcnow())
            )
            count = int(getattr(result, "rowcount", 0) or 0)
        if count:
            log.warning(
                "%d %s message(s) may or may not have been posted before a restart; "
                "they are not posted again",
                count,
                self.platform.name,
            )
        return count

    async def deliver_pending(self) -> int:
        """One round: everything pending now, channels concurrently. Returns events delivered.
        While paused on a credentials problem, a round is one channel's try, at most every
        ``credentials_retry_s``; if it goes through, the other channels follow at once."""
        if self.paused and self.clock() < self._probe_at:
            return 0
        by_area = await asyncio.to_thread(self._pending)
        before = self.stats.events
        if self.paused and by_area:
            first = next(iter(by_area))
            await self._channel(first, by_area.pop(first))
            if self.paused:
                return self.stats.events - before
        await asyncio.gather(*(self._channel(area, items) for area, items in by_area.items()))
        return self.stats.events - before

    async def post_now(self, outbox_ids: list[int]) -> int:
        """Post these stored events (a resident's answers to a visitor) at once, ahead of the
        rounds and their backlog: each claimed like any post and tried once; one that does not
        go out is left pending for the rounds (and one another worker claimed is theirs).
        Returns the events posted."""
        if self.paused or not outbox_ids:
            return 0
        by_area = await asyncio.to_thread(self._pending, outbox_ids)
        before = self.stats.events
        for area, items in by_area.items():
            for item in items:
                message = Outgoing(item.key, area, item.author, item.text, item.emoji)
                await self._post([item], message, "sent", attempts=1)
        return self.stats.events - before

    async def run(self, wake: asyncio.Event, poll_s: float = 2.0) -> None:
        """Deliver until cancelled: a round whenever ``wake`` is set (after a tick or an input),
        and every ``poll_s`` seconds anyway."""
        await asyncio.to_thread(self.recover)
        while True:
            wake.clear()  # before the round: news during the round means another round
            try:
                await self.deliver_pending()
            except Exception:  # a broken round must not end delivery for good
                log.exception("outbox delivery to %s failed; trying again", self.platform.name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), poll_s)

    # -- internals ------------------------------------------------------------------------

    def _pending(self, only: list[int] | None = None) -> dict[str, list[Pending]]:
        """The events not yet claimed for this platform (``only``: of these rows), by
        channel, in order; those it does not show are marked skipped."""
        name = self.platform.name
        claimed = exists().where(
            col(Delivery.outbox_id) == col(OutboxEvent.id), col(Delivery.platform) == name
        )
        by_area: dict[str, list[Pending]] = defaultdict(list)
        query = select(OutboxEvent).where(OutboxEvent.town_id == self.town_id, ~claimed)
        if only is not None:
            query = query.where(col(OutboxEvent.id).in_(only))
        with self.store.session() as s:
            rows = s.exec(query.order_by(col(OutboxEvent.id)).limit(BATCH)).all()
            for row in rows:
                assert row.id is not None
                shown = render(row.kind, row.payload)
                if shown is None or row.payload.get("for_platform", name) != name:
                    s.add(Delivery(outbox_id=row.id, platform=name, status="skipped"))
                    continue
                author, text, emoji = shown
                by_area[row.channel].append(
                    Pending(
                        row.id,
                        row.idempotency_key,
                        row.channel,
                        author,
                        text,
                        emoji,
                        f"{row.game_time:%H:%M}",
                        bool(row.payload.get("reply_to")),
                    )
                )
        return by_area

    async def _channel(self, area: str, items: list[Pending]) -> None:
        """A channel's pending events: replies to visitors first, one by one, in order; then
        the narration, in order, as one digest when it is long."""
        if self.paused and self.clock() < self._probe_at:
            return  # another channel found the credentials broken this round
        replies = [i for i in items if i.reply]
        narration = [i for i in items if not i.reply]
        if not await self._one_by_one(area, replies):
            return  # narration waits behind a reply still pending
        if len(narration) > self.digest_after and self._rate.room(area) != 0:
            await self._post(narration, self._digest(area, narration), "digested")
            self.stats.digests += 1
            return
        await self._one_by_one(area, narration)

    async def _one_by_one(self, area: str, items: list[Pending]) -> bool:
        """Post ``items`` in order; False when some are left for a later round."""
        for item in items:
            if self._rate.room(area) == 0:
                self.stats.deferred += 1
                return False  # the rest waits for a later round (or a digest), still in order
            if self.paused and self.clock() < self._probe_at:
                return False  # a credentials problem: the rest waits, in order
            message = Outgoing(item.key, area, item.author, item.text, item.emoji)
            if not await self._post([item], message, "sent"):
                return False  # keep the channel's order: the rest waits for the next round
        return True

    def _digest(self, area: str, items: list[Pending]) -> Outgoing:
        lines = [f"While the channel caught up, {len(items)} things happened here:"]
        for item in items:
            who = f"{item.author}: " if item.author else ""
            lines.append(f"{item.clock} {who}{item.text}")
        key = f"digest:{items[0].key}..{items[-1].key}"
        return Outgoing(key, area, "", "\n".join(lines))

    async def _post(
        self, items: list[Pending], message: Outgoing, done: str, attempts: int | None = None
    ) -> bool:
        """Claim ``items``, post ``message`` (split if long; each part tried ``attempts``
        times, by default ``max_attempts``) and record the outcome."""
        ids = [i.outbox_id for i in items]
        if not await asyncio.to_thread(self._claim, ids):
            return True  # another worker has them
        parts = split_text(message.text, self.platform.max_chars)
        posted: list[str] = []
        for n, part in enumerate(parts):
            key = message.key if len(parts) == 1 else f"{message.key}#{n + 1}"
            piece = Outgoing(key, message.area, message.author, part, message.emoji)
            result = await self._send_with_retry(piece, attempts)
            if isinstance(result, DeliveryError):
                if result.credentials and not posted:
                    await asyncio.to_thread(self._release, ids)  # it waits for the fix
                elif result.permanent or posted:
                    # a part already went out, or retrying cannot help: record, never repost
                    await asyncio.to_thread(
                        self._finish, ids, "failed", ",".join(posted), str(result)
                    )
                else:
                    await asyncio.to_thread(self._release, ids)
                return False
            posted.append(result)
        await asyncio.to_thread(self._finish, ids, done, ",".join(posted), "")
        self.stats.sent += len(posted)
        self.stats.events += len(ids)
        return True

    async def _send_with_retry(
        self, message: Outgoing, attempts: int | None = None
    ) -> str | DeliveryError:
        error = DeliveryError("not tried")
        tries = attempts or self.max_attempts
        for attempt in range(tries):
            await self._pace(message.area)
            try:
                message_id = await self.platform.send(message)
            except DeliveryError as exc:
                error = exc
            else:
                self._resume()
                return message_id
            if error.credentials:
                self._pause(error)
                break
            if error.permanent or (attempts is not None and attempt + 1 >= tries):
                break  # (a post tried once leaves the retries to the rounds)
            self.stats.retries += 1
            wait = error.retry_after
            if wait is None:
                ceiling = min(self.max_backoff_s, self.base_backoff_s * 2**attempt)
                wait = random.uniform(0, ceiling)
            log.info(
                "%s: %s (attempt %d of %d); next try in %.1f s",
                self.platform.name,
                error,
                attempt + 1,
                tries,
                wait,
            )
            await self.sleep(wait)
        return error

    def _pause(self, error: DeliveryError) -> None:
        if not self.paused:
            log.error(
                "%s: delivery paused, the events wait: %s. Delivery resumes by itself once "
                "a post goes through (tried every %.0f s).",
                self.platform.name,
                error,
                self.credentials_retry_s,
            )
        self.paused = str(error)
        self._probe_at = self.clock() + self.credentials_retry_s

    def _resume(self) -> None:
        if self.paused:
            log.warning("%s: delivery resumed (%s is fixed)", self.platform.name, self.paused)
            self.paused = ""

    async def _pace(self, area: str) -> None:
        """Wait for the platform's interval and the channel's rate (only the later parts of a
        long message ever wait for the rate: ``_channel`` starts none at the limit)."""
        last = self._last_post.get(area)
        wait = 0.0 if last is None else last + self.platform.min_interval_s - self.clock()
        wait = max(wait, self._rate.wait(area))
        if wait > 0:
            await self.sleep(wait)
        self._last_post[area] = self.clock()
        self._rate.note(area)

    def _claim(self, ids: list[int]) -> bool:
        try:
            with self.store.session() as s:
                for outbox_id in ids:
                    s.add(
                        Delivery(
                            outbox_id=outbox_id,
                            platform=self.platform.name,
                            status="sending",
                            attempts=1,
                        )
                    )
        except IntegrityError:
            return False
        return True

    def _finish(self, ids: list[int], status: str, message_id: str, error: str) -> None:
        with self.store.session() as s:
            s.execute(
                update(Delivery)
                .where(
                    col(Delivery.outbox_id).in_(ids), col(Delivery.platform) == self.platform.name
                )
                .values(
                    status=status,
                    message_id=message_id[:200],
                    error=error[:500],
                    updated_at=utcnow(),
                )
            )
        if status == "failed":
            log.warning("%s: gave up on a message: %s", self.platform.name, error)

    def _release(self, ids: list[int]) -> None:
        with self.store.session() as s:
            s.execute(
                delete(Delivery).where(
                    col(Delivery.outbox_id).in_(ids), col(Delivery.platform) == self.platform.name
                )
            )
        self.stats.released += len(ids)

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
4. Channels are served concurrently, each in order, paced by ``adapters.core.allowance``. A 429
   waits as long as the platform asked; other failures back off exponentially with full jitter.
   After ``max_attempts`` the claim is released: it is tried again next round, nothing is lost.
5. A resident's answer to a visitor is stored first, like every event, then posted at once by
   ``post_now`` (the runtime does, for every platform), claimed like any post and tried once;
   what does not go out then is left to the rounds. A channel's replies to visitors (events
   with ``reply_to``) go out first, one by one, and never in a digest.
6. At most ``channel_per_minute`` posts go to one channel in any minute (0: no limit), and a
   share of that minute is kept free for replies (``adapters.core.allowance``): a reply to a
   person is never held behind narration. A channel whose narration cannot all go out within
   what the minute leaves it (or is more than ``digest_after`` events behind) folds the town's
   narration into one digest (``adapters.core.digest``), keyed by the events it holds; residents'
   speech keeps messages of its own, after the digest, in order, and what the minute cannot
   take waits for a later round, still pending and in order. Only the parts of one long
   message wait inside a round, so one busy channel never holds up the others.
   **A channel shows the present**: what is more than one tick of the clock behind the town
   (its game time older than the clock less a tick's minutes), speech included, folds into the
   digest, a scene line quoting its best words, and the present goes out after it; and no
   resident's line older than a reply to a visitor is posted on its own after that reply (it
   would read as the answer): it folds too. The present itself goes out only as far as the
   channel can post it within one real tick (``tick_s``, or the town's own tick:
   ``ChannelAllowance.fits``): its speech first, on its own, its narration joining the scene
   line or left for the next one; speech that cannot all go either folds too. So a channel
   that cannot keep up is never more than about a tick behind.
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
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import exists
from sqlmodel import col, select

from adapters.core.allowance import REPLY_SHARE, ChannelAllowance
from adapters.core.claims import Claims
from adapters.core.digest import MOST, digest_text
from adapters.core.ports import DeliveryError, Outgoing, Platform
from adapters.core.text import render
from town.outbox.keys import digest_key, part_key
from town.store.db import Store
from town.store.models import Delivery, OutboxEvent, Town
from town.text import in_parts

log = logging.getLogger(__name__)

DIGEST_AFTER = 8  # a channel this many events behind gets a digest instead
BATCH = 500  # outbox rows looked at per round
LATELY = 30  # a channel's last narration lines: what a scene line's quote should be about


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
    stale: bool = False  # more than a tick of the clock behind the town: folded, speech too


@dataclass
class PumpStats:
    sent: int = 0  # platform messages posted
    events: int = 0  # outbox events delivered (a digest delivers several)
    digests: int = 0
    retries: int = 0
    released: int = 0  # claims given back after max_attempts, to be tried again
    deferred: int = 0  # times a channel at its rate limit left its events for a later round
    held: int = 0  # replies to people that waited longer for the channel than replies alone make


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
    reply_share: float = REPLY_SHARE  # of that minute, kept free for replies to people
    tick_s: float = 60.0  # real seconds a tick: what a channel cannot post in one is folded
    credentials_retry_s: float = 60.0  # while paused on a credentials problem, try this often
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    clock: Callable[[], float] = time.monotonic
    stats: PumpStats = field(default_factory=PumpStats)
    paused: str = ""  # the credentials problem delivery waits on ("" while it flows)
    _allowance: ChannelAllowance = field(init=False)
    _claims: Claims = field(init=False)
    _news: asyncio.Event | None = None  # set while ``run`` waits: news that ends a round early
    _probe_at: float = 0.0  # while paused: when one channel may try again
    _replied: dict[str, int] = field(default_factory=dict)  # area -> its latest reply posted
    _lately: dict[str, deque[str]] = field(default_factory=dict)  # area -> its last narration
    _tick_s: float = field(init=False)  # the town's own tick when it has one, else ``tick_s``

    def __post_init__(self) -> None:
        self._claims = Claims(self.store, self.town_id, self.platform.name)
        self._tick_s = self.tick_s
        self._allowance = ChannelAllowance(
            self.channel_per_minute,
            self.platform.min_interval_s,
            reply_share=self.reply_share,
            clock=self.clock,
        )

    def recover(self) -> int:
        """Rows a crash left in "sending" become "unknown" and are never posted again."""
        return self._claims.recover()

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
                message = Outgoing(item.key, area, item.author, item.text, item.emoji, reply=True)
                if await self._post([item], message, "sent", attempts=1):
                    self._note_reply(item)
        return self.stats.events - before

    async def run(self, wake: asyncio.Event, poll_s: float = 2.0) -> None:
        """Deliver until cancelled: a round whenever ``wake`` is set (after a tick or an input),
        and every ``poll_s`` seconds anyway."""
        await asyncio.to_thread(self.recover)
        self._news = wake  # news during a round ends its waits for narration: replies first
        try:
            while True:
                wake.clear()  # before the round: news during the round means another round
                try:
                    await self.deliver_pending()
                except Exception:  # a broken round must not end delivery for good
                    log.exception("outbox delivery to %s failed; trying again", self.platform.name)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wake.wait(), poll_s)
        finally:
            self._news = None

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
            town = s.get(Town, self.town_id)
            present = _present_from(town)
            if town is not None and town.tick_seconds:
                self._tick_s = town.tick_seconds
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
                        present is not None and _aware(row.game_time) < present,
                    )
                )
        return by_area

    async def _channel(self, area: str, items: list[Pending]) -> None:
        """A channel's pending events: replies to visitors first, one by one, in order; then
        the rest, in order. When the rest cannot all go out within what the channel's minute
        leaves narration, must wait for narration's next turn, or is long, the town's narration
        folds into one digest, and residents' speech follows it as messages of its own."""
        if self.paused and self.clock() < self._probe_at:
            return  # another channel found the credentials broken this round
        replies = [i for i in items if i.reply]
        rest = [i for i in items if not i.reply]
        if not await self._one_by_one(area, replies, reply=True):
            return  # the rest waits behind a reply still pending
        if not rest:
            return
        self._lately.setdefault(area, deque(maxlen=LATELY)).extend(
            i.text for i in rest if not i.author
        )
        answered = self._replied.get(area, 0)  # speech older than a reply never follows it
        past = [i for i in rest if i.stale or (i.author and i.outbox_id < answered)]
        present = [i for i in rest if i.outbox_id not in {p.outbox_id for p in past}]
        fits = self._allowance.fits(area, self._tick_s)
        if fits and bool(past) + len(present) > fits:
            past, rest = self._in_time(rest, past, present, fits)
        for start in range(0, len(past), MOST):  # the past, speech too, as scene lines
            scene = past[start : start + MOST]
            if not await self._post(scene, self._digest(area, scene), "digested"):
                return  # the rest waits, in order
            self.stats.digests += 1
        folded = {i.outbox_id for i in past}
        rest = [i for i in rest if i.outbox_id not in folded]
        if not rest:
            return
        room = self._allowance.room(area, reply=False)
        if room == 0:
            self.stats.deferred += 1
            return  # the rest waits for a later round (or a digest), still in order
        if len(rest) > self.digest_after:
            told = [i for i in rest if not i.author][:MOST]
            if len(told) > 1:
                if not await self._post(told, self._digest(area, told), "digested"):
                    return
                self.stats.digests += 1
                folded = {i.outbox_id for i in told}
                rest = [i for i in rest if i.outbox_id not in folded]
        await self._one_by_one(area, rest)

    @staticmethod
    def _in_time(
        rest: list[Pending], past: list[Pending], present: list[Pending], fits: int
    ) -> tuple[list[Pending], list[Pending]]:
        """What folds, and what goes now, when the present cannot all follow in the ``fits``
        posts a tick leaves: its speech goes first, on its own; its narration joins the past's
        scene line, or waits for the next one (it will be the past then); speech that cannot
        all go either folds too, into one scene line up to the present."""
        speech = [i for i in present if i.author]
        told = [i for i in present if not i.author]
        if bool(past) + len(speech) > fits:
            return rest, []
        if past:  # one scene line of the past and the present's narration, then the speech
            joining = {i.outbox_id for i in past + told}
            return [i for i in rest if i.outbox_id in joining], speech
        if len(speech) + 1 <= fits and len(told) > 1:
            return told, speech  # the narration as one line, then the speech
        return [], speech if speech else told[:fits]

    async def _one_by_one(self, area: str, items: list[Pending], *, reply: bool = False) -> bool:
        """Post ``items`` in order; False when some are left for a later round."""
        for item in items:
            if self._allowance.room(area, reply=reply) == 0:
                self.stats.deferred += 1
                return False  # the rest waits for a later round (or a digest), still in order
            if self.paused and self.clock() < self._probe_at:
                return False  # a credentials problem: the rest waits, in order
            message = Outgoing(item.key, area, item.author, item.text, item.emoji, reply=reply)
            if not await self._post([item], message, "sent"):
                return False  # keep the channel's order: the rest waits for the next round
            if reply:
                self._note_reply(item)
        return True

    def _note_reply(self, item: Pending) -> None:
        self._replied[item.area] = max(self._replied.get(item.area, 0), item.outbox_id)

    def _digest(self, area: str, items: list[Pending]) -> Outgoing:
        lately = self._lately.get(area, ())
        return Outgoing(
            digest_key(i.outbox_id for i in items), area, "", digest_text(items, list(lately))
        )

    async def _post(
        self, items: list[Pending], message: Outgoing, done: str, attempts: int | None = None
    ) -> bool:
        """Claim ``items``, post ``message`` (split if long; each part tried ``attempts``
        times, by default ``max_attempts``) and record the outcome."""
        if not message.reply and not await self._narration_turn(message.area):
            return False  # news came first: the round ends, the rest waits in order
        ids = [i.outbox_id for i in items]
        if not await asyncio.to_thread(self._claims.claim, ids):
            return True  # another worker has them
        parts = in_parts(message.text, self.platform.max_chars)
        posted: list[str] = []
        for n, part in enumerate(parts):
            piece = replace(message, key=part_key(message.key, n + 1, len(parts)), text=part)
            result = await self._send_with_retry(piece, attempts)
            if isinstance(result, DeliveryError):
                if result.credentials and not posted:
                    await asyncio.to_thread(self._release, ids)  # it waits for the fix
                elif result.permanent or posted:
                    # a part already went out, or retrying cannot help: record, never repost
                    await asyncio.to_thread(
                        self._claims.finish, ids, "failed", ",".join(posted), str(result)
                    )
                else:
                    await asyncio.to_thread(self._release, ids)
                return False
            posted.append(result)
        await asyncio.to_thread(self._claims.finish, ids, done, ",".join(posted), "")
        self.stats.sent += len(posted)
        self.stats.events += len(ids)
        return True

    async def _send_with_retry(
        self, message: Outgoing, attempts: int | None = None
    ) -> str | DeliveryError:
        error = DeliveryError("not tried")
        tries = attempts or self.max_attempts
        for attempt in range(tries):
            await self._pace(message.area, reply=message.reply)
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

    async def _narration_turn(self, area: str) -> bool:
        """Wait for narration's turn in the channel, unless news comes first (``run``'s wake:
        a reply stored, a tick): then False, and the round ends so that the next one serves
        the channel's replies first. A post whose turn has come always goes."""
        wait, news = self._allowance.wait(area, reply=False), self._news
        if news is None or wait <= 0:
            return True  # ``_pace`` waits, uninterrupted, when there is no news to hear
        if news.is_set():
            return False
        napping = asyncio.ensure_future(self.sleep(wait))
        heard = asyncio.ensure_future(news.wait())
        try:
            done, _ = await asyncio.wait({napping, heard}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            napping.cancel()
            heard.cancel()
        return heard not in done

    async def _pace(self, area: str, *, reply: bool) -> None:
        """Wait for the channel's allowance: a reply only for what replies alone make it wait
        (``adapters.core.allowance``), narration for the platform's interval and its share of
        the minute (only the later parts of a long message ever wait for the minute:
        ``_channel`` starts none without room)."""
        if reply and self._allowance.held_by_narration(area):
            self.stats.held += 1
        wait = self._allowance.wait(area, reply=reply)
        if wait > 0:
            await self.sleep(wait)
        self._allowance.note(area, reply=reply)

    def _release(self, ids: list[int]) -> None:
        self._claims.release(ids)
        self.stats.released += len(ids)


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _present_from(town: Town | None) -> datetime | None:
    """The game time a channel's present begins at: one tick of the clock before the town's."""
    if town is None:
        return None
    return _aware(town.clock) - timedelta(minutes=max(1, town.minutes_per_tick))

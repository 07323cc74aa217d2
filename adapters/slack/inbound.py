"""What members do in Slack, for the town: a message in a location channel is a visitor
speaking there; ``/town <command>`` and ``@bot town <command>`` are chat commands.

Every listener acks at once and does the town's work in a background task, so Slack always has
its answer within 3 seconds, whatever the engine is doing.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncRespond

from adapters.core.ports import Caller, Reply, TownPort
from adapters.slack.channels import LocationChannels
from adapters.slack.members import Members
from adapters.slack.poster import SlackPoster
from adapters.slack.reactions import emoji_of
from adapters.slack.text import MARKUP, unescape
from town.features.ratings.reactions import Reacted
from town.inputs.visit import EmptyWords, Visit

log = logging.getLogger(__name__)

PLATFORM = "slack"
SEEN_EVENTS = 1000  # event ids remembered, so a redelivered event is not heard twice
AUTHORS_KEPT = 500  # threads' first messages whose author is remembered
# a member's own words: a plain message, one with a file, a thread reply also sent to the channel
HEARD_SUBTYPES = (None, "file_share", "thread_broadcast")


class Inbound:
    """Bolt's listeners for messages, mentions and ``/town``, and the work they hand off."""

    def __init__(
        self,
        town: TownPort,
        channels: LocationChannels,
        members: Members,
        poster: SlackPoster,
    ) -> None:
        self.town, self.channels, self.members, self.poster = town, channels, members, poster
        self.bot_user_id = self.bot_id = ""  # known after auth.test
        self._authors: OrderedDict[str, str] = OrderedDict()  # "channel:ts" -> posted as
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        self._chains: dict[str, asyncio.Task[None]] = {}

    async def on_message(self, ack: AsyncAck, body: dict[str, Any], event: dict[str, Any]) -> None:
        await ack()
        channel, user = str(event.get("channel", "")), str(event.get("user") or "")
        area = self.channels.area_of(channel)
        if area is None or not self._from_member(event) or not self._first_time(body):
            return
        text = str(event.get("text") or "")
        if self.bot_user_id and text.lstrip().startswith(f"<@{self.bot_user_id}>"):
            return  # a command to the bot: the app_mention listener has it
        thread = str(event.get("thread_ts") or "")
        if thread == str(event.get("ts") or ""):
            thread = ""  # the thread's own first message replies to nobody
        self._hand_off(lambda: self._visitor_says(area, user, text, channel, thread), chain=channel)

    async def on_reaction(self, ack: AsyncAck, body: dict[str, Any], event: dict[str, Any]) -> None:
        """``reaction_added`` / ``reaction_removed`` on a message in a location channel."""
        await ack()
        item = event.get("item") or {}
        user = str(event.get("user") or "")
        channel, ts = str(item.get("channel", "")), str(item.get("ts", ""))
        if item.get("type") != "message" or not user or user == self.bot_user_id:
            return
        if self.channels.area_of(channel) is None or not self._first_time(body):
            return
        added = event.get("type") == "reaction_added"
        emoji = emoji_of(str(event.get("reaction") or ""))
        self._hand_off(lambda: self._reacted(user, ts, emoji, added))

    async def _reacted(self, user: str, ts: str, emoji: str, added: bool) -> None:
        member = await self.members.get(user)
        await self.town.reacted(Reacted(PLATFORM, user, member.name, ts, emoji, added=added))

    async def on_mention(self, ack: AsyncAck, body: dict[str, Any], event: dict[str, Any]) -> None:
        await ack()
        if not self._from_member(event, mention=True) or not self._first_time(body):
            return
        channel, user = str(event.get("channel", "")), str(event.get("user"))
        line = re.sub(r"^\s*<@[A-Z0-9]+(?:\|[^>]*)?>\s*", "", str(event.get("text") or ""))
        self._hand_off(lambda: self._mention_command(channel, user, unescape(line)))

    async def on_command(
        self, ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond
    ) -> None:
        await ack()
        # a signed request replayed within Slack's 5-minute window passes the signature check:
        # each command's trigger_id runs once
        if not self._first_time({"event_id": command.get("trigger_id")}):
            log.warning(
                "Slack: a /town request came again (trigger %s); not run twice",
                command.get("trigger_id"),
            )
            return
        self._hand_off(lambda: self._slash_command(command, respond))

    async def idle(self) -> None:
        """Wait until the work handed off by listeners is done (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*set(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        """Give the work in hand 5 seconds, then cancel it."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=5)
        for task in set(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _from_member(self, event: dict[str, Any], *, mention: bool = False) -> bool:
        """A person's own plain message: not ours, not a bot's, not an edit or a join."""
        user = event.get("user")
        if not user or user == self.bot_user_id or event.get("bot_id") or event.get("app_id"):
            return False
        return mention or event.get("subtype") in HEARD_SUBTYPES

    def _first_time(self, body: dict[str, Any]) -> bool:
        """False for an event Slack delivers again (a retry after a slow ack, a reconnect)."""
        event_id = str(body.get("event_id") or "")
        if not event_id:
            return True
        if event_id in self._seen:
            return False
        self._seen[event_id] = None
        while len(self._seen) > SEEN_EVENTS:
            self._seen.popitem(last=False)
        return True

    def _hand_off(self, work: Callable[[], Awaitable[None]], chain: str = "") -> None:
        """Run ``work`` after the ack, in the background; work on one ``chain`` (a channel's
        messages) runs in arrival order."""
        before = self._chains.get(chain) if chain else None

        async def run() -> None:
            if before is not None:
                await asyncio.wait([before])
            try:
                await work()
            except Exception:
                log.exception("Slack: handling an event failed")

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if chain:
            self._chains[chain] = task
            task.add_done_callback(lambda done: self._end_chain(chain, done))

    def hand_off(self, work: Callable[[], Awaitable[None]]) -> None:
        """Run ``work`` in the background, awaited by ``idle`` (other listeners' work)."""
        self._hand_off(work)

    def _end_chain(self, chain: str, done: asyncio.Task[None]) -> None:
        if self._chains.get(chain) is done:
            del self._chains[chain]

    async def _visitor_says(
        self, area: str, user: str, text: str, channel: str, thread: str
    ) -> None:
        if not text.strip():
            return  # a file with no words: nothing to hear
        member = await self.members.get(user)
        words = await self._readable(text)
        replying_to = await self._replying_to(channel, thread) if thread else ""
        try:
            visit = Visit.of(area, member.name, words, PLATFORM, user, replying_to=replying_to)
            await self.town.visitor_says(visit)
        except EmptyWords as exc:  # invisible characters or mentions only: told privately
            await self.poster.answer_mention(channel, user, Reply(str(exc), True, False))

    async def _replying_to(self, channel: str, thread: str) -> str:
        """Who a reply in the thread of ``thread`` (its first message's ts) answers: the name
        the town posted that message under (a resident's), "" for anyone else's message. The
        event names no author, so the message is read (``conversations.replies``, scope
        ``channels:history``) once per thread; best effort: never fails the message."""
        key = f"{channel}:{thread}"
        if key in self._authors:
            return self._authors[key]
        try:
            page = await self.members.client.conversations_replies(
                channel=channel, ts=thread, limit=1
            )
        except Exception as exc:  # a missing scope, Slack in trouble: heard all the same
            log.info("Slack: the message a member replied to is out of reach: %s", exc)
            return ""
        first: dict[str, Any] = next(iter(page.get("messages") or []), {})
        ours = (self.bot_id and first.get("bot_id") == self.bot_id) or (
            self.bot_user_id and first.get("user") == self.bot_user_id
        )
        author = str(first.get("username") or "") if ours else ""
        self._authors[key] = author
        while len(self._authors) > AUTHORS_KEPT:
            self._authors.popitem(last=False)
        return author

    async def _mention_command(self, channel: str, user: str, line: str) -> None:
        reply = await self.town.command(await self._caller(user, channel), line)
        await self.poster.answer_mention(channel, user, reply)

    async def _slash_command(self, command: dict[str, Any], respond: AsyncRespond) -> None:
        user, channel = str(command.get("user_id", "")), str(command.get("channel_id", ""))
        line = unescape(str(command.get("text") or ""))
        reply = await self.town.command(await self._caller(user, channel), line)
        await self.poster.answer_slash(respond, reply)

    async def confirmed(self, user: str, channel: str, line: str) -> Reply:
        """A confirmation button's line, run for the member who pressed it."""
        return await self.town.command(await self._caller(user, channel), line)

    async def _caller(self, user: str, channel: str) -> Caller:
        member = await self.members.get(user)
        return Caller(PLATFORM, user, member.name, member.is_admin, self.channels.area_of(channel))

    async def _readable(self, text: str) -> str:
        """Slack's markup as a person reads it: ``<@U1>`` as ``@Name``, ``<#C1|cafe>`` as
        ``#cafe``, links as their label, entities unescaped."""
        names: dict[str, str] = {}
        for user in list(dict.fromkeys(re.findall(r"<@([A-Z0-9]+)(?:\|[^>]*)?>", text)))[:5]:
            names[user] = (await self.members.get(user)).name

        def plain(match: re.Match[str]) -> str:
            inside = match.group(1)
            target, _, label = inside.partition("|")
            if target.startswith("@"):
                return "@" + (label or names.get(target[1:], "someone"))
            if target.startswith("#"):
                return "#" + (label or self.channels.area_of(target[1:]) or "channel")
            if target.startswith("!"):
                return label or "@" + target[1:].split("^")[0]
            return label or target

        return unescape(MARKUP.sub(plain, text))

"""The town in a Discord server, through discord.py.

Outbound, every town location is a text channel in one category named after the town; residents
post there through the channel's webhook under their own names (``send``). Inbound, a member's
message in a location channel is a visitor's words there; ``!town <command>``, a mention of the
bot followed by a command, and the ``/town`` slash command run the chat commands. A private
answer is ephemeral to a slash command and a direct message otherwise.

Nothing a resident or a visitor writes may ping anyone: the client and every single send carry
``AllowedMentions.none()`` (a webhook does not inherit the client's default), and mention syntax
is broken with a zero-width space as well.

Provisioning is idempotent: channels are found by their stored id, then by name in the town's
category, and only then created; the mapping and each channel's webhook live in ``ChannelLink``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
import zlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import aiohttp
import discord
from discord import app_commands
from sqlmodel import select

from adapters.core.base import (
    Caller,
    DeliveryError,
    Outgoing,
    Reply,
    TownPort,
    channel_about,
    split_text,
)
from town.store.db import Store
from town.store.models import ChannelLink

log = logging.getLogger(__name__)

PLATFORM = "discord"
MAX_CHARS = 2000
COMMANDS_KEY = "__commands__"  # the ChannelLink row holding the hash of the synced commands
DEFAULT_AVATAR = "https://cdn.discordapp.com/embed/avatars/{n}.png"  # Discord's own six
NO_MENTIONS = discord.AllowedMentions.none()
ZWSP = "\u200b"

_FORBIDDEN_IN_NAME = re.compile(r"discord|clyde", re.IGNORECASE)
_MASS_MENTION = re.compile(r"@(everyone|here)", re.IGNORECASE)
_TAG_MENTION = re.compile(r"<(@[!&]?|#)(\d+)>")  # <@user>, <@!user>, <@&role>, <#channel>
_PREFIX = "!town"
DIRECT_MARK = "📬"  # on a command whose answer went by direct message


# -- text rules ------------------------------------------------------------------------------


def webhook_name(name: str, fallback: str = "Town") -> str:
    """A name Discord accepts on a webhook message: 1-80 characters without "discord" or
    "clyde" in any case (they become "Disc-ord", "Cl-yde"), nor "@", "#", ":" or "```"."""
    text = name.replace("```", " ").translate(str.maketrans("@#:", "   "))
    text = " ".join(text.split())
    text = _FORBIDDEN_IN_NAME.sub(_break_word, text)[:80].strip()
    if text:
        return text
    return webhook_name(fallback) if fallback else "Town"


def _break_word(match: re.Match[str]) -> str:
    word = match.group(0)
    cut = 4 if len(word) == 7 else 2  # "disc-ord", "cl-yde"
    return f"{word[:cut]}-{word[cut:]}"


def escape_mentions(text: str, *, compact: bool = False) -> str:
    """``text`` with every mention made inert: @everyone, @here, users, roles, channels. A
    zero-width space goes after the "@" (or "#"); with ``compact`` the text keeps its length
    instead, the "@" or "#" becoming its fullwidth twin (＠, ＃)."""
    if compact:
        text = _MASS_MENTION.sub(lambda m: f"＠{m.group(1)}", text)
        return _TAG_MENTION.sub(
            lambda m: f"<{m.group(1).replace('@', '＠').replace('#', '＃')}{m.group(2)}>", text
        )
    text = _MASS_MENTION.sub(lambda m: f"@{ZWSP}{m.group(1)}", text)
    return _TAG_MENTION.sub(lambda m: f"<{m.group(1)}{ZWSP}{m.group(2)}>", text)


def channel_name(area: str) -> str:
    """A location's text channel name as Discord stores it: "Hobbs Cafe" -> "hobbs-cafe"."""
    name = re.sub(r"[^\w-]", "", re.sub(r"\s+", "-", area.strip().casefold()))
    return name[:100] or "place"


def _slug(text: str) -> str:
    return "".join(ch for ch in text.casefold() if ch.isalnum())


# -- the adapter -----------------------------------------------------------------------------


class _TownClient(discord.Client):
    """The gateway connection; its events go to the adapter."""

    def __init__(self, adapter: DiscordAdapter, intents: discord.Intents, ready: float) -> None:
        super().__init__(intents=intents, allowed_mentions=NO_MENTIONS, guild_ready_timeout=ready)
        self.adapter = adapter
        self.tree: app_commands.CommandTree[_TownClient] = app_commands.CommandTree(self)

    async def on_message(self, message: discord.Message) -> None:
        try:
            await self.adapter.on_message(message)
        except Exception:  # one bad message must not disturb the others
            log.exception("a Discord message in #%s could not be handled", message.channel)


class DiscordAdapter:
    """One town in one Discord server (guild)."""

    name = PLATFORM
    max_chars = MAX_CHARS
    # Discord lets a webhook post about 30 messages a minute in one channel: stay below it.
    min_interval_s = 2.0

    def __init__(
        self,
        port: TownPort,
        store: Store,
        town_id: int,
        *,
        token: str,
        guild_id: int | None = None,
        message_content: bool = True,
        avatar_url: str | None = DEFAULT_AVATAR,
        guild_ready_timeout: float = 2.0,
        connect_timeout: float = 60.0,
    ) -> None:
        self.port, self.store, self.town_id = port, store, town_id
        self.guild_id, self.message_content = guild_id, message_content
        self.avatar_url = avatar_url  # a template: {n} is 0-5 from the name, {name} the name
        self.connect_timeout = connect_timeout
        self._token = token
        intents = discord.Intents.none()
        intents.guilds = True
        intents.guild_messages = True
        intents.message_content = message_content
        self.client = _TownClient(self, intents, guild_ready_timeout)
        self.guild: discord.Guild | None = None
        self._category: discord.CategoryChannel | None = None
        self._channel_of: dict[str, int] = {}  # area -> channel id
        self._area_of: dict[int, str] = {}  # channel id -> area
        self._hooks: dict[str, discord.Webhook] = {}  # area -> its channel's webhook
        self._repair_locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._gateway: asyncio.Task[None] | None = None

    # -- life ------------------------------------------------------------------------------

    async def start(self) -> None:
        try:
            try:
                await self.client.login(self._token)
            except discord.LoginFailure as exc:
                raise RuntimeError(
                    "Discord rejected the bot token: check BOTTOWN_DISCORD_TOKEN (the Bot page "
                    "of the Developer Portal, Reset Token)"
                ) from exc
            self._gateway = asyncio.create_task(self.client.connect(), name="discord-gateway")
            self._gateway.add_done_callback(_gateway_ended)
            await self._wait_ready(self._gateway)
            self.guild = self._pick_guild()
            await self._provision(self.guild)
            await self._sync_commands(self.guild)
        except BaseException:
            await self.stop()
            raise
        intent = "on" if self.message_content else "off"
        log.info("Discord: the town lives in %r (message_content intent %s)", self.guild, intent)

    async def stop(self) -> None:
        await self.client.close()
        if self._gateway is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._gateway
            self._gateway = None

    def status_line(self) -> str:
        guild = self.guild.name if self.guild else "(not connected)"
        intent = "on" if self.message_content else "off (mentions and slash commands only)"
        return f"Discord: guild {guild}, message_content intent {intent}"

    async def _wait_ready(self, gateway: asyncio.Task[None]) -> None:
        ready = asyncio.create_task(self.client.wait_until_ready())
        done, _ = await asyncio.wait(
            {gateway, ready}, timeout=self.connect_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if ready in done:
            return
        ready.cancel()
        if gateway not in done:
            raise TimeoutError(f"Discord: no READY from the gateway in {self.connect_timeout} s")
        error = gateway.exception()
        if isinstance(error, discord.PrivilegedIntentsRequired):
            raise RuntimeError(
                "Discord refused the message_content intent: turn on 'Message Content Intent' "
                "for the bot in the Developer Portal, or set "
                "BOTTOWN_DISCORD_MESSAGE_CONTENT=false (then: mentions and slash commands only)"
            ) from error
        raise RuntimeError(f"Discord: the gateway connection ended: {error!r}") from error

    def _pick_guild(self) -> discord.Guild:
        if self.guild_id is not None:
            guild = self.client.get_guild(self.guild_id)
            if guild is None:
                raise RuntimeError(
                    f"the bot is not in the Discord server {self.guild_id}: invite it with the "
                    "URL in the README, or fix BOTTOWN_DISCORD_GUILD_ID"
                )
            return guild
        guilds = sorted(self.client.guilds, key=lambda g: g.id)
        if not guilds:
            raise RuntimeError("the bot is in no Discord server yet: invite it (see the README)")
        if len(guilds) > 1:
            log.warning(
                "the bot is in %d servers; the town uses %r (set BOTTOWN_DISCORD_GUILD_ID)",
                len(guilds),
                guilds[0].name,
            )
        return guilds[0]

    # -- provisioning ----------------------------------------------------------------------

    async def _provision(self, guild: discord.Guild) -> None:
        """The town's category, a text channel and a webhook per location: found, else made."""
        existing: list[discord.abc.GuildChannel] = list(await guild.fetch_channels())
        links = self._load_links()
        self._category = await self._ensure_category(guild, existing)
        for area in self.port.areas():
            link = links.get(area)
            channel = self._find_channel(existing, area, link)
            if channel is None:
                channel = await self._create_channel(guild, area)
                existing.append(channel)
            extra = dict(link.extra) if link and link.channel_id == str(channel.id) else {}
            hook = self._stored_webhook(extra) or await self._find_or_make_webhook(channel)
            self._remember(area, channel.id, hook)

    async def _ensure_category(
        self, guild: discord.Guild, existing: Sequence[discord.abc.GuildChannel]
    ) -> discord.CategoryChannel:
        wanted = self.port.town_name.casefold()
        for channel in existing:
            if isinstance(channel, discord.CategoryChannel) and channel.name.casefold() == wanted:
                return channel
        return await guild.create_category(
            self.port.town_name[:100], reason="bottown: the town's category"
        )

    def _find_channel(
        self,
        existing: Sequence[discord.abc.GuildChannel],
        area: str,
        link: ChannelLink | None,
    ) -> discord.TextChannel | None:
        texts = [c for c in existing if isinstance(c, discord.TextChannel)]
        if link is not None:
            for channel in texts:
                if str(channel.id) == link.channel_id:
                    return channel
        category_id = self._category.id if self._category else None
        for channel in texts:
            if channel.category_id == category_id and _slug(channel.name) == _slug(area):
                return channel
        return None

    async def _create_channel(self, guild: discord.Guild, area: str) -> discord.TextChannel:
        if self._category is None or guild.get_channel(self._category.id) is None:
            found = list(await guild.fetch_channels())
            self._category = await self._ensure_category(guild, found)
        return await guild.create_text_channel(
            channel_name(area),
            category=self._category,
            topic=channel_about(self.port.town_name, area)[:1024],
            reason="bottown: one channel per town location",
        )

    def _stored_webhook(self, extra: dict[str, Any]) -> discord.Webhook | None:
        hook_id, token = extra.get("webhook_id"), extra.get("webhook_token")
        if not hook_id or not token:
            return None
        return discord.Webhook.partial(int(hook_id), str(token), client=self.client)

    async def _find_or_make_webhook(self, channel: discord.TextChannel) -> discord.Webhook:
        """The bot's own webhook in ``channel`` if it has one (a store that was reset), else a
        new one."""
        me = self.client.user
        for hook in await channel.webhooks():
            if hook.token and me is not None and hook.user is not None and hook.user.id == me.id:
                return hook
        return await channel.create_webhook(
            name=webhook_name(self.port.town_name), reason="bottown: residents post through it"
        )

    def _remember(self, area: str, channel_id: int, hook: discord.Webhook) -> None:
        self._channel_of[area] = channel_id
        self._area_of = {cid: a for a, cid in self._channel_of.items()}
        self._hooks[area] = hook
        extra = {"webhook_id": str(hook.id), "webhook_token": hook.token or ""}
        self._save_link(area, str(channel_id), extra)

    async def _replace_webhook(self, area: str, stale: discord.Webhook) -> None:
        """The webhook is gone (Unknown Webhook): make a new one, and a new channel too if the
        channel went with it."""
        async with self._repair_locks[area]:
            if self._hooks.get(area) is not stale:
                return  # replaced meanwhile
            assert self.guild is not None
            channel = self.guild.get_channel(self._channel_of[area])
            if isinstance(channel, discord.TextChannel):
                try:
                    hook = await self._find_or_make_webhook(channel)
                except discord.NotFound:  # Unknown Channel
                    channel = None
            if not isinstance(channel, discord.TextChannel):
                log.warning("Discord: the channel of %s is gone; making it again", area)
                channel = await self._create_channel(self.guild, area)
                hook = await self._find_or_make_webhook(channel)
            self._remember(area, channel.id, hook)

    # -- the store -------------------------------------------------------------------------

    def _load_links(self) -> dict[str, ChannelLink]:
        with self.store.session() as s:
            rows = s.exec(
                select(ChannelLink).where(
                    ChannelLink.town_id == self.town_id, ChannelLink.platform == PLATFORM
                )
            ).all()
            return {row.area: row for row in rows}

    def _save_link(self, area: str, channel_id: str, extra: dict[str, Any]) -> None:
        with self.store.session() as s:
            row = s.exec(
                select(ChannelLink).where(
                    ChannelLink.town_id == self.town_id,
                    ChannelLink.platform == PLATFORM,
                    ChannelLink.area == area,
                )
            ).first()
            if row is None:
                row = ChannelLink(town_id=self.town_id, platform=PLATFORM, area=area, channel_id="")
            if row.channel_id != channel_id or row.extra != extra:
                row.channel_id, row.extra = channel_id, extra
                s.add(row)

    # -- slash commands --------------------------------------------------------------------

    def _town_command(self) -> app_commands.Command[Any, ..., None]:
        @app_commands.command(name="town", description="Talk to the town (try: help)")
        @app_commands.describe(line='a command: look, where, time, interview Isabella "hi?", help')
        async def town(interaction: discord.Interaction[_TownClient], line: str = "help") -> None:
            await self._slash(interaction, line)

        return town

    async def _sync_commands(self, guild: discord.Guild) -> None:
        """Register ``/town`` in the guild; upload it only when it changed (Discord allows
        200 uploads a day per guild)."""
        tree = self.client.tree
        tree.clear_commands(guild=guild)
        tree.add_command(self._town_command(), guild=guild)
        payload = [command.to_dict(tree) for command in tree.get_commands(guild=guild)]
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        try:
            remote = {command.name for command in await tree.fetch_commands(guild=guild)}
            stored = self._load_links().get(COMMANDS_KEY)
            unchanged = (
                stored is not None
                and stored.channel_id == str(guild.id)
                and stored.extra.get("hash") == digest
                and remote == {str(c["name"]) for c in payload}
            )
            if unchanged:
                log.info("Discord: slash commands unchanged, not synced")
                return
            await tree.sync(guild=guild)
        except discord.Forbidden:
            log.warning(
                "Discord: no permission to register /town (re-invite the bot with the "
                "applications.commands scope); !town and mentions still work"
            )
            return
        self._save_link(COMMANDS_KEY, str(guild.id), {"hash": digest})

    async def _slash(self, interaction: discord.Interaction[_TownClient], line: str) -> None:
        # The town may think (an LLM call) before answering: acknowledge within 3 s first.
        await interaction.response.defer(ephemeral=True, thinking=True)
        area = self._area_of.get(interaction.channel_id or 0)
        reply = await self._run(_caller(interaction.user, area), line)
        parts = split_text(escape_mentions(reply.text), MAX_CHARS) or ["Done."]
        if not reply.private:
            # the first follow-up would edit the ephemeral "thinking" message and stay
            # ephemeral: remove it, so the follow-up is a new message everyone sees
            await interaction.delete_original_response()
        for part in parts:
            await interaction.followup.send(
                part, ephemeral=reply.private, allowed_mentions=NO_MENTIONS
            )

    async def _run(self, caller: Caller, line: str) -> Reply:
        try:
            return await self.port.command(caller, line)
        except Exception:
            log.exception("the command %r failed", line)
            return Reply("Something went wrong in the town; it is in the bot's log.", True, False)

    # -- inbound messages ------------------------------------------------------------------

    async def on_message(self, message: discord.Message) -> None:
        me = self.client.user
        if message.author.bot or message.webhook_id is not None or me is None:
            return  # our webhooks, our replies, other bots
        if self.guild is None or message.guild is None or message.guild.id != self.guild.id:
            return
        area = self._area_of.get(message.channel.id)
        kind, text = self._read(message.content, me.id)
        if kind == "command":
            caller = _caller(message.author, area)
            await self._reply(message, await self._run(caller, text))
        elif area is not None and text.strip():
            words = _readable(message, text)
            author = message.author
            await self.port.visitor_says(PLATFORM, str(author.id), author.display_name, area, words)

    def _read(self, content: str, bot_id: int) -> tuple[str, str]:
        """("command", line) or ("say", words) for a message's content. ``!town look`` and a
        mention of the bot followed by a command are commands; a mention followed by anything
        else is speech (so visitors can talk without the message_content intent)."""
        stripped = content.strip()
        if stripped == _PREFIX or stripped.startswith(_PREFIX + " "):
            return "command", stripped[len(_PREFIX) :].strip() or "help"
        mention = re.match(rf"<@!?{bot_id}>\s*", stripped)
        if mention is None:
            return "say", content
        rest = stripped[mention.end() :].strip()
        first = rest.split(maxsplit=1)[0].lower().lstrip("/") if rest else "help"
        names = set(self.port.command_names())
        if not rest or first in names or first == "town":
            return "command", rest or "help"
        return "say", rest

    async def _reply(self, message: discord.Message, reply: Reply) -> None:
        if reply.private and await self._direct(message, reply.text):
            return
        first, *rest = split_text(escape_mentions(reply.text), MAX_CHARS) or ["Done."]
        await message.channel.send(
            first,
            allowed_mentions=NO_MENTIONS,
            reference=message.to_reference(fail_if_not_exists=False),
            mention_author=False,
        )
        for part in rest:
            await message.channel.send(part, allowed_mentions=NO_MENTIONS)

    async def _direct(self, message: discord.Message, text: str) -> bool:
        """A private answer to a command written in a channel, as a direct message (only
        interactions have ephemeral replies), the command marked 📬; False for a member who
        takes no direct messages, who is answered in the channel instead."""
        try:
            for part in split_text(escape_mentions(text), MAX_CHARS) or ["Done."]:
                await message.author.send(part, allowed_mentions=NO_MENTIONS)
        except discord.Forbidden:
            return False
        with contextlib.suppress(discord.HTTPException):  # no add_reactions permission: fine
            await message.add_reaction(DIRECT_MARK)
        return True

    # -- outbound --------------------------------------------------------------------------

    async def send(self, message: Outgoing) -> str:
        """Post one message through its channel's webhook; returns Discord's message id."""
        hook = self._hooks.get(message.area)
        if hook is None:
            raise DeliveryError(f"no Discord channel for {message.area!r}", permanent=True)
        author = message.author or self.port.town_name
        try:
            try:
                return await self._execute(hook, author, message.text)
            except discord.NotFound as exc:  # 10015 Unknown Webhook: deleted by someone
                log.warning("Discord: the webhook of %s is gone (%s)", message.area, exc.code)
                await self._replace_webhook(message.area, hook)
                return await self._execute(self._hooks[message.area], author, message.text)
        except discord.HTTPException as exc:
            raise _delivery_error(exc) from exc
        except discord.RateLimited as exc:
            raise DeliveryError(str(exc), retry_after=exc.retry_after) from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise DeliveryError(f"Discord unreachable: {exc!r}") from exc

    async def _execute(self, hook: discord.Webhook, author: str, text: str) -> str:
        content = escape_mentions(text)
        if len(content) > MAX_CHARS:  # the zero-width spaces pushed it over the limit
            content = escape_mentions(text, compact=True)
        sent = await hook.send(
            content,
            username=webhook_name(author, self.port.town_name),
            avatar_url=self._avatar(author),
            allowed_mentions=NO_MENTIONS,
            wait=True,
        )
        return str(sent.id)

    def _avatar(self, author: str) -> str | None:
        if not self.avatar_url:
            return None
        n = zlib.crc32(author.encode()) % 6
        return self.avatar_url.format(n=n, name=quote(author))


def _gateway_ended(task: asyncio.Task[None]) -> None:
    """discord.py reconnects by itself; it gives up only on errors a restart cannot fix."""
    if not task.cancelled() and task.exception() is not None:
        log.error("Discord: the gateway connection ended for good", exc_info=task.exception())


def _delivery_error(exc: discord.HTTPException) -> DeliveryError:
    what = f"Discord answered {exc.status} (code {exc.code}): {exc.text}"
    if exc.status == 429:
        return DeliveryError(what, retry_after=_retry_after(exc.response.headers))
    if exc.status >= 500:
        return DeliveryError(what)
    return DeliveryError(what, permanent=True)  # 403, 400, 404 after a new webhook, ...


def _retry_after(headers: Any) -> float:
    for key in ("X-RateLimit-Reset-After", "Retry-After"):
        value = headers.get(key)
        if value:
            with contextlib.suppress(ValueError):
                return max(0.0, float(value))
    return 1.0


def _caller(user: discord.User | discord.Member, area: str | None) -> Caller:
    admin = isinstance(user, discord.Member) and user.guild_permissions.manage_guild
    return Caller(PLATFORM, str(user.id), user.display_name, admin, area)


def _readable(message: discord.Message, text: str) -> str:
    """Mention tags as the names people see (``<@123>`` -> ``@Alice``)."""
    users = {str(u.id): u.display_name for u in message.mentions}
    roles = {str(r.id): r.name for r in message.role_mentions}
    guild = message.guild

    def channel(m: re.Match[str]) -> str:
        found = guild.get_channel(int(m.group(1))) if guild else None
        return f"#{found.name}" if found else "#channel"

    text = re.sub(r"<@!?(\d+)>", lambda m: "@" + users.get(m.group(1), "someone"), text)
    text = re.sub(r"<@&(\d+)>", lambda m: "@" + roles.get(m.group(1), "role"), text)
    return re.sub(r"<#(\d+)>", channel, text)

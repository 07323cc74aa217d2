"""What members do in Discord, for the town: a message in a location channel is a visitor's
words there; ``!town <command>``, a mention of the bot followed by a command, and the ``/town``
slash command run the chat commands. A private answer is ephemeral to a slash command and a
direct message otherwise."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

import discord
from discord import app_commands

from adapters.core.links import ChannelLinks
from adapters.core.ports import Caller, Reply, TownPort
from adapters.discord.channels import LocationChannels
from adapters.discord.client import NO_MENTIONS, TownClient
from adapters.discord.confirm import confirm_view
from adapters.discord.gateway import caller_of
from adapters.discord.poster import send_answer, webhook_name
from adapters.discord.proxies import ProxyWatch
from town.inputs.visit import EmptyWords, Visit

log = logging.getLogger(__name__)

PLATFORM = "discord"
COMMANDS_KEY = "__commands__"  # the ChannelLink row holding the hash of the synced commands
DIRECT_MARK = "📬"  # on a command whose answer went by direct message
_PREFIX = "!town"
_NAMED = re.compile(r"\*\*(.+?):\*\* ")  # "**Isabella Rodriguez:** ..." as a post names its author


class Inbound:
    """Members' messages and commands, handed to the town; the answers, back to them."""

    def __init__(
        self,
        town: TownPort,
        client: TownClient,
        channels: LocationChannels,
        links: ChannelLinks,
        proxies: ProxyWatch,
    ) -> None:
        self.town, self.client, self.channels, self.links = town, client, channels, links
        self.proxies = proxies

    async def on_message(self, message: discord.Message) -> None:
        me, guild = self.client.user, self.channels.guild
        if guild is None or message.guild is None or message.guild.id != guild.id or me is None:
            return
        area = self.channels.area_of(message.channel.id)
        if self.proxies.proxied(message):  # a member's words, reposted under a character's name
            if area is not None and message.content.strip():
                who = message.author
                user_id = f"{who.id}:{who.display_name}"  # one proxy webhook, many characters
                words = _readable(message, message.content)
                replying_to = await self._replying_to(message, area)
                await self._visitor_says(
                    message, area, who.display_name, words, user_id, replying_to
                )
            return
        if message.author.bot or message.webhook_id is not None:
            return  # our webhooks, our replies, other bots
        kind, text = self._read(message.content, me.id)
        if kind == "command":
            caller = caller_of(message.author, area)
            await self._reply(message, await self._run(caller, text))
        elif area is not None and text.strip():
            if await self.proxies.replaced(message):
                return  # a proxy bot deleted it: its repost is heard instead
            words = _readable(message, text)
            author, replying_to = message.author, await self._replying_to(message, area)
            await self._visitor_says(
                message, area, author.display_name, words, str(author.id), replying_to
            )

    async def _visitor_says(
        self,
        message: discord.Message,
        area: str,
        name: str,
        words: str,
        user_id: str,
        replying_to: str,
    ) -> None:
        """The words (plain text: mentions read as names) to the town; a message with nothing
        left once cleaned (invisible characters, mentions only) is refused, and the member told
        so privately."""
        try:
            visit = Visit.of(area, name, words, PLATFORM, user_id, replying_to=replying_to)
            await self.town.visitor_says(visit)
        except EmptyWords as exc:
            await self._reply(message, Reply(str(exc), private=True, ok=False))

    async def _replying_to(self, message: discord.Message, area: str) -> str:
        """The resident whose message ``message`` replies to: the name on a message of the
        area's own webhook (or the bot's, name in the text), "" for anyone else's. Discord's
        event carries the replied-to message; it is fetched only when it does not (best
        effort: never fails the message)."""
        reference = message.reference
        if reference is None or reference.message_id is None:
            return ""
        replied = reference.resolved or reference.cached_message
        if replied is None:
            try:
                replied = await message.channel.fetch_message(reference.message_id)
            except (discord.HTTPException, discord.ClientException) as exc:
                log.info("Discord: the message a member replied to is out of reach: %s", exc)
                return ""
        if not isinstance(replied, discord.Message):  # deleted meanwhile
            return ""
        hook, me = self.channels.hook(area), self.client.user
        if hook is not None and replied.webhook_id == hook.id:
            if replied.author.name != webhook_name(self.town.town_name):
                return replied.author.name
            named = _NAMED.match(replied.content)  # a name Discord refused: posted as the town
            return named.group(1) if named else ""
        if me is not None and replied.author.id == me.id and replied.webhook_id is None:
            named = _NAMED.match(replied.content)  # no webhook here: the bot, name in the text
            return named.group(1) if named else ""
        return ""

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
        names = set(self.town.command_names())
        if not rest or first in names or first == "town":
            return "command", rest or "help"
        return "say", rest

    async def _run(self, caller: Caller, line: str) -> Reply:
        try:
            return await self.town.command(caller, line)
        except Exception:
            log.exception("the command %r failed", (line.split() or [""])[0])  # not its words
            log.debug("the failed command's line: %r", line)
            return Reply("Something went wrong in the town; it is in the bot's log.", True, False)

    async def _reply(self, message: discord.Message, reply: Reply) -> None:
        if reply.private and await self._direct(message, reply):
            return
        reference = message.to_reference(fail_if_not_exists=False)
        await send_answer(
            message.channel.send,
            reply.text,
            first={"reference": reference, "mention_author": False},
        )

    async def _direct(self, message: discord.Message, reply: Reply) -> bool:
        """A private answer to a command written in a channel, as a direct message (only
        interactions have ephemeral replies), the command marked 📬; False for a member who
        takes no direct messages, who is answered in the channel instead."""
        try:
            await send_answer(message.author.send, reply.text, last=_button(reply, message.author))
        except discord.Forbidden:
            return False
        with contextlib.suppress(discord.HTTPException):  # no add_reactions permission: fine
            await message.add_reaction(DIRECT_MARK)
        return True

    # -- the slash command -----------------------------------------------------------------

    async def sync_commands(self, guild: discord.Guild) -> None:
        """Register ``/town`` in the guild; upload it only when it changed (Discord allows
        200 uploads a day per guild)."""
        tree = self.client.tree
        self.hear_commands(guild)
        payload = [command.to_dict(tree) for command in tree.get_commands(guild=guild)]
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        try:
            remote = {command.name for command in await tree.fetch_commands(guild=guild)}
            stored = self.links.load().get(COMMANDS_KEY)
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
        self.links.save(COMMANDS_KEY, str(guild.id), {"hash": digest})

    def hear_commands(self, guild: discord.Guild) -> None:
        """Answer ``/town`` in the guild (registered here; uploading it is ``sync_commands``)."""
        self.client.tree.clear_commands(guild=guild)
        self.client.tree.add_command(self._town_command(), guild=guild)

    def _town_command(self) -> app_commands.Command[Any, ..., None]:
        @app_commands.command(name="town", description="Talk to the town (try: help)")
        @app_commands.describe(line='a command: look, where, time, interview Isabella "hi?", help')
        async def town(interaction: discord.Interaction[TownClient], line: str = "help") -> None:
            await self._slash(interaction, line)

        return town

    async def _slash(self, interaction: discord.Interaction[TownClient], line: str) -> None:
        # The town may think (an LLM call) before answering: acknowledge within 3 s first,
        # privately (most answers are private; the deferral's flags stay with its follow-ups).
        await interaction.response.defer(ephemeral=True, thinking=True)
        area = self.channels.area_of(interaction.channel_id or 0)
        reply = await self._run(caller_of(interaction.user, area), line)
        channel = interaction.channel
        if not reply.private and isinstance(channel, discord.TextChannel):
            try:  # a public answer: plain messages in the channel, which everyone sees
                said = f"/town {line} ({interaction.user.display_name}):\n{reply.text}"
                await send_answer(channel.send, said)
            except discord.HTTPException:  # no Send Messages here: answer the caller at least
                log.warning("Discord: no permission to answer /town in #%s", channel)
            else:
                await interaction.followup.send(
                    "Answered in the channel.", ephemeral=True, allowed_mentions=NO_MENTIONS
                )
                return
        await send_answer(
            interaction.followup.send,
            reply.text,
            last=_button(reply, interaction.user),
            ephemeral=True,
        )

    async def confirmed(self, interaction: discord.Interaction[Any], line: str) -> None:
        """A member pressed the confirmation button under a private answer: the line runs for
        them, and the answer is theirs alone too."""
        await interaction.response.defer(ephemeral=True, thinking=True)
        area = self.channels.area_of(interaction.channel_id or 0)
        reply = await self._run(caller_of(interaction.user, area), line)
        await send_answer(interaction.followup.send, reply.text, ephemeral=True)


def _button(reply: Reply, user: discord.abc.User) -> dict[str, Any]:
    """The ``view`` keyword of a message that carries the answer's confirmation button."""
    if not reply.confirm:
        return {}
    guild = user.guild.id if isinstance(user, discord.Member) else None
    return {"view": confirm_view(reply.confirm, user.id, reply.confirm_label, guild)}


def _readable(message: discord.Message, text: str) -> str:
    """Discord's markup as plain text, the names people see: ``<@123>`` -> ``@Alice``,
    ``<@&1>`` -> ``@Role``, ``<#1>`` -> ``#cafe``, custom emoji ``<:name:1>`` -> ``:name:``,
    timestamps ``<t:1700000000:R>`` -> the time they stand for."""
    users = {str(u.id): u.display_name for u in message.mentions}
    roles = {str(r.id): r.name for r in message.role_mentions}
    guild = message.guild

    def channel(m: re.Match[str]) -> str:
        found = guild.get_channel(int(m.group(1))) if guild else None
        return f"#{found.name}" if found else "#channel"

    text = re.sub(r"<@!?(\d+)>", lambda m: "@" + users.get(m.group(1), "someone"), text)
    text = re.sub(r"<@&(\d+)>", lambda m: "@" + roles.get(m.group(1), "role"), text)
    text = re.sub(r"<a?(:\w+:)\d+>", r"\1", text)
    text = re.sub(r"<t:(-?\d+)(?::[tTdDfFR])?>", _timestamp, text)
    return re.sub(r"<#(\d+)>", channel, text)


def _timestamp(match: re.Match[str]) -> str:
    """A Discord timestamp tag as the time it stands for (UTC)."""
    try:
        return datetime.fromtimestamp(int(match.group(1)), UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (OverflowError, OSError, ValueError):
        return "some time"

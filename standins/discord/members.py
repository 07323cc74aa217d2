"""What members (and other bots) do in the fake Discord's guild: join, write, and have a proxy
bot (PluralKit, Tupperbox) repost their words under a character's name."""

from __future__ import annotations

from standins.discord.guild import Guild, Service
from standins.discord.wire import (
    AUDIT_MEMBER_BAN_ADD,
    AUDIT_MEMBER_KICK,
    INTENT_GUILD_MEMBERS,
    INTENT_GUILD_MESSAGE_REACTIONS,
    INTENT_GUILD_MODERATION,
    VIEW_AUDIT_LOG,
    Json,
    now,
)


class Members(Service):
    def add_member(
        self,
        name: str,
        *,
        admin: bool = False,
        guild: Guild | None = None,
        user: Json | None = None,
        roles: tuple[str, ...] = (),
    ) -> Json:
        """A member of ``guild`` (the home guild by default); ``user``: a person already in
        another server, who joins this one too (one user, a member in each)."""
        guild = guild or self.home
        if user is None:
            user_id = str(self.snowflake())
            user = {
                "id": user_id,
                "username": name.lower(),
                "discriminator": "0",
                "global_name": name,
                "avatar": None,
            }
            self.users[user_id] = user
        guild.members[user["id"]] = {
            "user": user,
            "nick": None,
            "roles": [*([str(guild.admin_role_id)] if admin else []), *roles],
            "joined_at": now(),
            "deaf": False,
            "mute": False,
            "flags": 0,
        }
        return user

    async def member_says(
        self,
        user: Json,
        channel_id: str,
        content: str,
        *,
        mention_bot: bool = False,
        reply_to: Json | None = None,
        resolved: bool = True,
    ) -> Json:
        """A member writes in a channel: MESSAGE_CREATE as Discord would send it to the bot.
        With ``reply_to`` (a message) it is a reply to it (type 19, a message reference, the
        replied-to message in the event unless not ``resolved``: then the bot must fetch it)."""
        guild = self.guild_of(channel_id)
        member = {k: v for k, v in guild.members[user["id"]].items() if k != "user"}
        mentions = [self.bot_user] if mention_bot else []
        if mention_bot:
            content = f"<@{self.app_id}> {content}"
        message = self._message(channel_id, content, user, member=member, mentions=mentions)
        if reply_to is not None:
            message["type"] = 19
            message["message_reference"] = {
                "type": 0,
                "message_id": reply_to["id"],
                "channel_id": reply_to["channel_id"],
                "guild_id": str(guild.id),
            }
            if resolved:
                message["referenced_message"] = self._as_received(reply_to)
        await self.dispatch("MESSAGE_CREATE", self._as_received(message))
        return message

    async def member_reacts(
        self, user: Json, message: Json, emoji: str, *, removed: bool = False
    ) -> bool:
        """A member adds (or removes) a reaction on a message: MESSAGE_REACTION_ADD (with the
        member) or MESSAGE_REACTION_REMOVE, sent only to a bot that asked for the
        GUILD_MESSAGE_REACTIONS intent, as Discord does. ``emoji``: a unicode emoji, or
        "name:id" for a custom one. Returns whether the event was sent."""
        if not self.intents & INTENT_GUILD_MESSAGE_REACTIONS:
            return False
        name, _, custom = emoji.partition(":")
        data: Json = {
            "user_id": user["id"],
            "channel_id": message["channel_id"],
            "message_id": message["id"],
            "guild_id": message["guild_id"],
            "emoji": {"id": custom or None, "name": name},
            "burst": False,
            "type": 0,
        }
        if removed:
            await self.dispatch("MESSAGE_REACTION_REMOVE", data)
            return True
        member = self.guild_of(message["channel_id"]).members[user["id"]]
        data["member"] = member
        if message.get("author", {}).get("id"):
            data["message_author_id"] = message["author"]["id"]
        await self.dispatch("MESSAGE_REACTION_ADD", data)
        return True

    async def other_bot_says(self, channel_id: str, content: str) -> Json:
        """Another bot (not ours) writes in a channel."""
        robot = {
            "id": str(self.snowflake()),
            "username": "robot",
            "discriminator": "0",
            "bot": True,
        }
        message = self._message(channel_id, content, robot)
        await self.dispatch("MESSAGE_CREATE", self._as_received(message))
        return message

    def add_proxy_bot(self, app_id: int, name: str) -> Json:
        """A proxy bot (PluralKit, Tupperbox) in the server; returns its webhook."""
        user = self.add_member(name)
        self.users.pop(user["id"])
        member = self.members.pop(user["id"])
        user.update(id=str(app_id), bot=True)
        self.users[user["id"]] = user
        self.members[user["id"]] = {**member, "user": user}
        return {"application_id": str(app_id), "id": str(self.snowflake()), "user": user}

    async def proxy_says(
        self, proxy: Json, member: Json, channel_id: str, content: str, character: str
    ) -> None:
        """A member writes; the proxy deletes the message and reposts it under ``character``
        through its webhook, as PluralKit does."""
        original = await self.member_says(member, channel_id, content)
        await self.dispatch(
            "MESSAGE_DELETE",
            {"id": original["id"], "channel_id": channel_id, "guild_id": original["guild_id"]},
        )
        author = {"id": proxy["id"], "username": character, "discriminator": "0000", "bot": True}
        author["avatar"] = None
        repost = self._message(channel_id, content, author, webhook_id=proxy["id"])
        repost["application_id"] = proxy["application_id"]
        self.messages.append(repost)
        await self.dispatch("MESSAGE_CREATE", self._as_received(repost))

    # -- departures, with the gateway events Discord sends for each (to a bot whose intents and
    # permissions let it see them) ---------------------------------------------------------------

    async def ban(self, user: Json, by: Json, reason: str | None = None) -> None:
        """A moderator bans a member: GUILD_BAN_ADD and the audit log entry (moderation
        intent; the entry only with View Audit Log), then GUILD_MEMBER_REMOVE (members)."""
        await self._gone(user, by, AUDIT_MEMBER_BAN_ADD, reason)

    async def kick(self, user: Json, by: Json, reason: str | None = None) -> None:
        """A moderator kicks a member: no event of its own, only the audit log entry (moderation
        intent and View Audit Log) and GUILD_MEMBER_REMOVE (members intent)."""
        await self._gone(user, by, AUDIT_MEMBER_KICK, reason)

    async def leaves(self, user: Json) -> None:
        """A member leaves the server: GUILD_MEMBER_REMOVE, to the members intent only."""
        await self._gone(user, None, None, None)

    async def _gone(
        self, user: Json, by: Json | None, action: int | None, reason: str | None
    ) -> None:
        self.members.pop(user["id"], None)
        guild_id = str(self.guild_id)
        if action == AUDIT_MEMBER_BAN_ADD and self.intents & INTENT_GUILD_MODERATION:
            await self.dispatch("GUILD_BAN_ADD", {"guild_id": guild_id, "user": user})
        seen = self.intents & INTENT_GUILD_MODERATION and self.bot_permissions & VIEW_AUDIT_LOG
        if action is not None and by is not None and seen:
            entry = {
                "guild_id": guild_id,
                "id": str(self.snowflake()),
                "action_type": action,
                "target_id": user["id"],
                "user_id": by["id"],
                "reason": reason,
                "changes": [],
            }
            await self.dispatch("GUILD_AUDIT_LOG_ENTRY_CREATE", entry)
        if self.intents & INTENT_GUILD_MEMBERS:
            await self.dispatch("GUILD_MEMBER_REMOVE", {"guild_id": guild_id, "user": user})

"""The fake Discord's application commands and interactions: a member's slash command, the
bot's callback (within 3 s), its follow-ups (within 15 minutes) and the original response."""

from __future__ import annotations

import secrets

from aiohttp import web

from standins.discord.guild import Guild, Service
from standins.discord.wire import (
    EPHEMERAL,
    LOADING,
    MEMBER_PERMISSIONS,
    InteractionRecord,
    Json,
    body_of,
    components_problem,
    error,
    json_response,
    pinged,
)


class Interactions(Service):
    async def slash(self, user: Json, channel_id: str, name: str, options: list[Json]) -> str:
        """A member runs a slash command: INTERACTION_CREATE; returns the interaction token."""
        guild = self.guild_of(channel_id)
        assert guild.bot_in, "the bot is not in that server: Discord shows it no /town"
        command = next(c for c in guild.commands if c["name"] == name)
        member = dict(guild.members[user["id"]])
        member["permissions"] = str(guild.permissions(member))
        token = "itoken-" + secrets.token_hex(8)
        payload: Json = {
            "id": str(self.snowflake()),
            "application_id": str(self.app_id),
            "type": 2,
            "token": token,
            "version": 1,
            "data": {
                "id": command["id"],
                "name": name,
                "type": 1,
                "options": options,
                "guild_id": str(guild.id),
            },
            "guild_id": str(guild.id),
            "guild": {"id": str(guild.id), "locale": "en-US", "features": []},
            "channel_id": channel_id,
            "channel": self.channels[channel_id],
            "member": member,
            "app_permissions": str(MEMBER_PERMISSIONS),
            "locale": "en-US",
            "guild_locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": str(guild.id)},
            "context": 0,
            "attachment_size_limit": 8 * 1024 * 1024,
        }
        self.interactions[token] = InteractionRecord(payload, created=self.clock())
        await self.dispatch("INTERACTION_CREATE", payload)
        return token

    async def click(self, user: Json, message: Json, custom_id: str) -> str:
        """A member presses a button of a message the bot sent (in a channel, ephemeral or
        not, or in a direct message): INTERACTION_CREATE of type 3; the interaction token."""
        buttons = [
            item["custom_id"]
            for row in (message.get("body") or {}).get("components") or []
            for item in row["components"]
        ]
        assert custom_id in buttons, f"no button {custom_id!r} on that message: {buttons}"
        token = "itoken-" + secrets.token_hex(8)
        shown = {k: v for k, v in message.items() if k not in ("body", "pinged", "to")}
        shown["components"] = message["body"]["components"]
        payload: Json = {
            "id": str(self.snowflake()),
            "application_id": str(self.app_id),
            "type": 3,
            "token": token,
            "version": 1,
            "data": {"custom_id": custom_id, "component_type": 2},
            "message": shown,
            "channel_id": message["channel_id"],
            "locale": "en-US",
            "entitlements": [],
            "attachment_size_limit": 8 * 1024 * 1024,
        }
        if message.get("guild_id"):
            guild = self.guild_of(message["channel_id"])
            member = dict(guild.members[user["id"]])
            member["permissions"] = str(guild.permissions(member))
            payload.update(
                guild_id=str(guild.id),
                guild={"id": str(guild.id), "locale": "en-US", "features": []},
                channel=self.channels[message["channel_id"]],
                member=member,
                app_permissions=str(MEMBER_PERMISSIONS),
                guild_locale="en-US",
                authorizing_integration_owners={"0": str(guild.id)},
                context=0,
            )
        else:  # a direct message: the user, no member
            payload.update(
                user=user,
                channel={"id": message["channel_id"], "type": 1},
                authorizing_integration_owners={"0": "0"},
                context=1,
            )
        self.interactions[token] = InteractionRecord(payload, created=self.clock())
        await self.dispatch("INTERACTION_CREATE", payload)
        return token

    async def _followup(self, request: web.Request, token: str) -> web.Response:
        record = self.interactions.get(token)
        if record is None:
            return error(404, 10015, "Unknown Webhook")
        if self.clock() - record.created > 15 * 60:
            return error(401, 50027, "Invalid Webhook Token")
        body = await body_of(request)
        if problem := components_problem(body):
            return error(400, 50035, f"Invalid Form Body ({problem})")
        channel_id = record.payload["channel_id"]
        if record.original is not None and not (record.original_edited or record.original_deleted):
            # Discord: the first follow-up after a deferral edits the "thinking" message and
            # keeps its flags (an ephemeral deferral stays ephemeral).
            content = body.get("content", "")
            record.original.update(
                content=content, body=body, pinged=pinged(content, body.get("allowed_mentions"))
            )
            record.original["flags"] &= ~LOADING
            record.original_edited = True
            message = record.original
        else:
            message = self._message(channel_id, body.get("content", ""), self.bot_user, body=body)
            message["flags"] = int(body.get("flags", 0))
            message["webhook_id"] = str(self.app_id)
        record.followups.append(message)
        if not message["flags"] & EPHEMERAL:
            self.messages.append(message)
        return json_response(message)

    async def _edit_original(self, request: web.Request) -> web.Response:
        record = self.interactions.get(request.match_info["token"])
        if record is None or record.original is None or record.original_deleted:
            return error(404, 10008, "Unknown Message")
        body = await body_of(request)
        record.original.update(content=body.get("content", ""), body=body)
        record.original_edited = True
        return json_response(record.original)

    async def _delete_original(self, request: web.Request) -> web.Response:
        record = self.interactions.get(request.match_info["token"])
        if record is None or record.original is None or record.original_deleted:
            return error(404, 10008, "Unknown Message")
        record.original_deleted = True
        return web.Response(status=204)

    def _commands_guild(self, request: web.Request) -> Guild | web.Response:
        guild = self.guilds.get(request.match_info["guild"])
        if guild is None:
            return error(404, 10004, "Unknown Guild")
        if not guild.bot_in:
            return error(403, 50001, "Missing Access")
        return guild

    async def _get_commands(self, request: web.Request) -> web.Response:
        guild = self._commands_guild(request)
        return guild if isinstance(guild, web.Response) else json_response(guild.commands)

    async def _put_commands(self, request: web.Request) -> web.Response:
        guild = self._commands_guild(request)
        if isinstance(guild, web.Response):
            return guild
        by_name = {c["name"]: c for c in guild.commands}
        stored = []
        for body in await body_of(request):
            old = by_name.get(body["name"])
            stored.append(
                {
                    "type": 1,
                    "options": [],
                    "default_member_permissions": None,
                    "nsfw": False,
                    "contexts": None,
                    "integration_types": [0],
                    **body,
                    "id": old["id"] if old else str(self.snowflake()),
                    "application_id": str(self.app_id),
                    "guild_id": request.match_info["guild"],
                    "version": str(self.snowflake()),
                }
            )
        guild.commands = stored
        return json_response(stored)

    async def _callback(self, request: web.Request) -> web.Response:
        if fault := self._fault("callback"):
            return fault
        record = self.interactions.get(request.match_info["token"])
        if record is not None and self.clock() - record.created > 3.0:
            return error(404, 10062, "Unknown interaction")
        if record is None or record.callbacks:
            return error(400, 40060, "Interaction has already been acknowledged.")
        body = await body_of(request)
        record.callbacks.append(body)
        data = body.get("data") or {}
        flags = int(data.get("flags", 0))
        kind = int(body["type"])
        if kind == 5:
            flags |= LOADING
        channel_id = record.payload["channel_id"]
        message = self._message(channel_id, data.get("content", ""), self.bot_user, body=data)
        message.update(flags=flags, webhook_id=str(self.app_id))
        record.original = message
        if kind == 4 and not flags & EPHEMERAL:
            self.messages.append(message)
        interaction = {
            "id": record.payload["id"],
            "type": record.payload["type"],
            "response_message_id": message["id"],
            "response_message_loading": kind == 5,
            "response_message_ephemeral": bool(flags & EPHEMERAL),
        }
        return json_response(
            {"interaction": interaction, "resource": {"type": kind, "message": message}}
        )

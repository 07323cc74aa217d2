"""``bottown gateway``: Discord's gateway apart from the towns.

A gateway process holds some of the bot's shards (``--shards 0-3 --shard-count 8``: discord.py's
sharded client with those shard ids; none given: every shard Discord recommends), keeps Discord's
pace of IDENTIFYs and its day's session starts (``adapters.discord.shards``), and runs no town.
For each server of its shards that founded a town (a ``Community`` row), the Discord adapter's own
inbound translation hears the members (``DiscordAdapter.listen``: the channels the store links,
nothing provisioned), and ``StoredTown`` writes what they do into the store as that town's
``WaitingInput``: a visitor's words in a place's channel, a reaction to a resident's message.
Servers joining and leaving are followed as they come.

One process doing both, gateway and towns (``bottown run --platform discord``), stays the
default.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import discord
from sqlmodel import select

from adapters.core.ports import Caller, Reply, Thinking
from adapters.discord.adapter import DiscordAdapter
from adapters.discord.gateway import DiscordGateway
from adapters.discord.shards import ShardSet
from bot.runtime.consent import leaving_forgets
from bot.runtime.live import watch_served
from bot.runtime.settings import Settings
from bot.runtime.taking_in import REACTION, WORDS, reaction_body, words_body
from bot.runtime.watch import Watch
from bot.runtime.wiring import open_store
from town.features.ratings.reactions import Reacted
from town.inputs.visit import Visit
from town.store import waiting
from town.store.db import Store
from town.store.models import Community, Town
from town.views.card import ResidentCard, TownMap

log = logging.getLogger(__name__)

PLATFORM = "discord"


@dataclass
class StoredTown:
    """A town as a gateway process serves it (``TownPort``): what members do is written to the
    store for the process that runs the town, and nothing is run here."""

    store: Store
    town_id: int
    name: str
    watch: Watch

    @property
    def town_name(self) -> str:
        return self.name

    def areas(self) -> list[str]:
        return []  # a gateway provisions no channel

    async def visitor_says(self, visit: Visit) -> None:
        await asyncio.to_thread(self._write, WORDS, words_body(visit))

    async def reacted(self, reaction: Reacted) -> bool:
        await asyncio.to_thread(self._write, REACTION, reaction_body(reaction))
        return True

    async def member_left(self, platform: str, user_id: str, how: str, name: str = "") -> bool:
        return False  # departures reach the town through the process that runs it

    def forgets(self) -> int:
        return 0  # nothing of members is kept here to read again

    async def command(self, caller: Caller, line: str) -> Reply:
        return Reply(
            "This gateway carries members' words and reactions; the town's commands are "
            "answered where it runs (`bottown run --platform discord`).",
            private=True,
            ok=False,
        )

    def command_names(self) -> list[str]:
        return []

    def thinking(self) -> Thinking:
        return Thinking("the process that runs the town", offline=False)

    async def town_map(self) -> TownMap:
        raise LookupError("a gateway process runs no town")

    async def resident_card(self, name: str) -> ResidentCard:
        raise LookupError("a gateway process runs no town")

    def _write(self, kind: str, body: dict[str, Any]) -> None:
        waiting.keep(self.store, self.town_id, kind, body)
        self.watch.inputs_stored.labels(self.name, kind).inc()


@dataclass
class GatewayProcess:
    """The shards' servers, each with a town heard and its members' doings stored."""

    store: Store
    gateway: DiscordGateway
    watch: Watch
    member_departures: bool = False
    listening: dict[int, DiscordAdapter] = field(default_factory=dict)  # guild id -> its ears

    async def run(self, ready: Callable[[], None] | None = None) -> None:
        """Until cancelled."""
        self.gateway.on_guild = self.guild_changed
        await self.gateway.start()
        try:
            for guild in self.gateway.guilds():
                await self.listen(guild)
            self.watch.shards.set(len(self.gateway.client.shards))
            log.info(
                "gateway: %s, %d servers, %d with a town",
                self.gateway.shards,
                len(self.gateway.guilds()),
                len(self.listening),
            )
            if ready is not None:
                ready()
            await asyncio.Event().wait()
        finally:
            await self.gateway.stop()

    async def guild_changed(self, guild: discord.Guild, joined: bool) -> None:
        if joined:
            await self.listen(guild)
        elif (ears := self.listening.pop(guild.id, None)) is not None:
            await ears.stop()  # (the shared gateway stays)
            self.watch.servers_heard.set(len(self.listening))

    async def listen(self, guild: discord.Guild) -> None:
        """Hear the server's town, if it founded one and it is not paused."""
        if guild.id in self.listening:
            return
        found = await asyncio.to_thread(self._community, guild.id)
        if found is None or found[0].removed_at is not None or guild.id in self.listening:
            return
        row, name = found
        port = StoredTown(self.store, row.town_id, name, self.watch)
        ears = DiscordAdapter(
            port,
            self.store,
            row.town_id,
            gateway=self.gateway,
            guild_id=guild.id,
            member_departures=self.member_departures,
        )
        ears.listen()
        self.listening[guild.id] = ears
        self.watch.servers_heard.set(len(self.listening))

    def _community(self, guild_id: int) -> tuple[Community, str] | None:
        """The server's community row and its town's name."""
        with self.store.session() as s:
            found = s.exec(
                select(Community, Town.name)
                .join(Town, Town.id == Community.town_id)  # type: ignore[arg-type]
                .where(Community.platform == PLATFORM, Community.key == str(guild_id))
            ).first()
            if found is None:
                return None
            s.expunge(found[0])
            return found[0], found[1]


async def serve_gateway(
    settings: Settings, shards: ShardSet, *, ready: Callable[[], None] | None = None
) -> None:
    """``bottown gateway``: the shards' sessions, until cancelled."""
    if settings.discord_token is None:
        raise ValueError("bottown gateway needs BOTTOWN_DISCORD_TOKEN (see the README)")
    store = open_store(settings)
    try:
        departures = "leave" in leaving_forgets(settings.forget_on_leave)
        gateway = DiscordGateway(
            settings.discord_token.get_secret_value(),
            message_content=settings.discord_message_content,
            member_departures=departures,
            shards=shards,
        )
        watch = Watch(store)
        async with watch_served(watch, settings):  # /healthz, /metrics on BOTTOWN_METRICS_PORT
            await GatewayProcess(store, gateway, watch, departures).run(ready)
    finally:
        store.dispose()

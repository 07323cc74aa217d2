"""``bottown bench communities``: one bot process serving many Discord servers, each its own
town, against the stand-ins: the fake Discord (``standins.discord``, every server on one gateway
connection) and the fake LLM server (a fixed latency per call, ``--slots``).

Every server founds its town by slash command (``/town line:found``, a Smallville of
``residents`` residents, Isabella Rodriguez and Sam Moore among them); then for ``minutes`` one
member in each town writes to Isabella where she is every 20 to 40 s, while every town ticks at
``tick_seconds``. Figures: towns founded, towns on time (their clock never behind its pace), the
p50/p95 seconds from a visitor's message to Isabella's first post in that channel after it,
peak RSS of the process, and LLM calls a resident-day (the fake's requests over the residents'
game days lived).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import statistics
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import discord
import yarl
from sqlmodel import select

from adapters.discord.channels import channel_name
from adapters.discord.gateway import DiscordGateway
from bot.bench.scale import peak_rss_mb, peak_rss_reset
from bot.bench.town import start_fake_llm
from bot.runtime.communities import Communities
from bot.runtime.scheduler import Timekeeper
from bot.runtime.settings import Settings
from bot.runtime.watch import Watch
from bot.runtime.wiring import Services
from standins.discord.guild import Guild
from standins.discord.server import FakeDiscord
from standins.discord.wire import Json
from town.store.models import Resident

PERSONA = Path(__file__).resolve().parents[2] / "personas" / "smallville"
KEPT_FIRST = ("Isabella Rodriguez", "Sam Moore")  # the scenario's facts name them
MINUTES_A_TICK = 10
FOUND_TRIES = 3  # a member tries /town found again when the bot let it expire
EXPIRED_S = 5.0  # unacknowledged this long after Discord sent it: expired (Discord allows 3 s)


@dataclass
class CommunitiesResult:
    servers: int
    residents: int
    founded: int
    on_time_pct: float
    first_reply_p50_s: float | None
    first_reply_p95_s: float | None
    unanswered: int
    peak_rss_mb: float
    calls_per_resident_day: float | None
    founding_s: float

    def as_json(self) -> dict[str, Any]:
        return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in vars(self).items()}


def persona_of(residents: int, folder: Path) -> Path:
    """Smallville with its first ``residents`` residents (the two its scenario names first)."""
    folder.mkdir(parents=True)
    for name in ("town.toml", "scenario.toml"):
        (folder / name).write_text((PERSONA / name).read_text())
    head, *blocks = (PERSONA / "residents.toml").read_text().split("\n[[residents]]")
    named = sorted(blocks, key=lambda b: not any(f'name = "{n}"' in b for n in KEPT_FIRST))
    kept = "".join("\n[[residents]]" + b for b in named[: max(len(KEPT_FIRST), residents)])
    (folder / "residents.toml").write_text(head + kept)
    return folder


@contextlib.contextmanager
def discord_at(fake: FakeDiscord) -> Any:
    """discord.py pointed at the fake (its two base URLs), as before afterwards."""
    base, gateway = discord.http.Route.BASE, discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY
    discord.http.Route.BASE = fake.api_base
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(fake.gateway_url)
    try:
        yield
    finally:
        discord.http.Route.BASE = base
        discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = gateway


async def run_communities_bench(
    settings: Settings,
    servers: int,
    residents: int,
    latency_ms: float,
    slots: int,
    minutes: float,
    tick_seconds: float = 10.0,
) -> CommunitiesResult:
    proc, url = start_fake_llm(latency_ms, slots)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            local = settings.model_copy(
                update={
                    "data_dir": Path(tmp) / "data",
                    "database_url": None,
                    "chroma_url": None,
                    "llm_base_url": url,
                    "llm_model": "fake",
                    "llm_slots": slots or 256,
                    "community_personas": [str(persona_of(residents, Path(tmp) / "persona"))],
                    "tick_seconds": tick_seconds,
                    "daily_token_budget": 0,
                    "daily_call_budget": 0,
                    "visitor_messages_per_minute": 0,
                }
            )
            fake = await FakeDiscord().start()
            fake.clock = time.monotonic  # Discord's rate limits in real time
            try:
                with discord_at(fake):
                    return await _measure(local, fake, url, servers, residents, minutes)
            finally:
                await fake.stop()
    finally:
        proc.terminate()
        proc.wait()


async def _measure(
    settings: Settings, fake: FakeDiscord, url: str, servers: int, residents: int, minutes: float
) -> CommunitiesResult:
    guilds = [fake.home, *(fake.add_guild(f"Server {n}") for n in range(1, servers))]
    admins, members = [], []
    for guild in guilds:
        guild.bot_in = True
        fake.add_text_channel("general", guild=guild)
        admins.append(fake.add_member("Mayor", admin=True, guild=guild))
        members.append(fake.add_member("Visitor", guild=guild))
    posted: dict[str, list[tuple[float, str]]] = {}  # channel -> (when, by whom) of webhook posts
    fake.watchers.append(lambda event, data: _seen(posted, event, data))
    services = Services.open(settings)
    keeper = Timekeeper(services.store, settings)
    gateway = DiscordGateway("test-token", guild_ready_timeout=0.5)
    communities = Communities(settings, services, gateway, Watch(services.store), keeper)
    peak_rss_reset()
    running = asyncio.create_task(communities.run())
    try:
        await _until(lambda: all(g.commands for g in guilds), 60 + servers)
        began = time.monotonic()
        answers = await asyncio.gather(
            *(_found(fake, g, a) for g, a in zip(guilds, admins, strict=True))
        )
        founding_s = time.monotonic() - began
        founded = sum("is founded" in a for a in answers)
        requests_before = _requests(url)
        waits = await _visit(communities, fake, guilds, members, posted, minutes)
        calls = _requests(url) - requests_before
        behind = [keeper.clock_behind_pct(communities.town_id_of(g.id)) for g in guilds]
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await keeper.close()
        services.close()
    answered = sorted(w for w in waits if w is not None)
    days = minutes * 60 / settings.tick_seconds * MINUTES_A_TICK / 1440 * residents * founded
    return CommunitiesResult(
        servers=servers,
        residents=residents,
        founded=founded,
        on_time_pct=100 * sum(1 for b in behind if b is not None and b == 0) / len(guilds),
        first_reply_p50_s=statistics.median(answered) if answered else None,
        first_reply_p95_s=answered[int(0.95 * (len(answered) - 1))] if answered else None,
        unanswered=sum(w is None for w in waits),
        peak_rss_mb=peak_rss_mb(),
        calls_per_resident_day=calls / days if days else None,
        founding_s=founding_s,
    )


def _seen(posted: dict[str, list[tuple[float, str]]], event: str, data: Json) -> None:
    if event == "MESSAGE_CREATE" and data.get("webhook_id"):
        who = str(data["author"].get("username", ""))
        posted.setdefault(str(data["channel_id"]), []).append((time.monotonic(), who))


async def _found(fake: FakeDiscord, guild: Guild, admin: Json) -> str:
    """``/town line:found`` as the server's admin, tried again as a member would when the bot
    let the interaction expire (no acknowledgement within Discord's 3 s); the answer."""
    general = fake.channel_named("general", guild=guild)["id"]
    line = {"name": "line", "type": 3, "value": "found"}
    for _ in range(FOUND_TRIES):
        token = await fake.slash(admin, general, "town", [line])
        record = fake.interactions[token]
        await _until(partial(_answered_or_expired, fake, record), 900)
        if record.followups:
            return str(record.followups[-1]["content"])
    return f"not founded: the bot let {FOUND_TRIES} /town interactions expire"


def _answered_or_expired(fake: FakeDiscord, record: Any) -> bool:
    expired = not record.callbacks and fake.clock() - record.created > EXPIRED_S
    return bool(record.followups) or expired


async def _visit(
    communities: Communities,
    fake: FakeDiscord,
    guilds: list[Guild],
    members: list[Json],
    posted: dict[str, list[tuple[float, str]]],
    minutes: float,
) -> list[float | None]:
    """Each town's visitor writes to Isabella where she is, every 20-40 s; the wait for her
    first post there after each message (None: none before the next; asleep, say)."""
    end = time.monotonic() + minutes * 60
    rng = random.Random(51)

    async def one(guild: Guild, member: Json) -> list[float | None]:
        waits: list[float | None] = []
        await asyncio.sleep(rng.uniform(0, 20))
        while time.monotonic() < end:
            area = where(communities.town_id_of(guild.id)).split(":")[0]
            there = fake.channel_named(channel_name(area), guild=guild)["id"]
            said = time.monotonic()
            await fake.member_says(member, there, "Isabella, how are you today?")
            await asyncio.sleep(rng.uniform(20, 40))
            after = [t for t, who in posted.get(there, []) if t > said and who == KEPT_FIRST[0]]
            waits.append(min(after) - said if after else None)
        return waits

    def where(town_id: int) -> str:
        with communities.services.store.session() as s:
            return s.exec(
                select(Resident.location).where(
                    Resident.town_id == town_id, Resident.name == KEPT_FIRST[0]
                )
            ).one()

    found = await asyncio.gather(*(one(g, m) for g, m in zip(guilds, members, strict=True)))
    return [w for waits in found for w in waits]


def _requests(url: str) -> int:
    base = url.removesuffix("/v1")
    with urllib.request.urlopen(f"{base}/_fake/stats", timeout=10) as answer:
        return int(json.loads(answer.read())["requests"])


async def _until(check: Any, within: float) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("the bench's servers did not answer in time")
        await asyncio.sleep(0.05)

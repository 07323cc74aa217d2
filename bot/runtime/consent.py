"""The members' commands over what the town keeps of them (``forget-me``, ``forget``, ``mute``,
``unmute``, an admin's ``channel``), the forget-on-leave rule, and where replays are kept.
Platform-neutral: ``bot.runtime.commands`` registers them beside the others."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.core.ports import Caller, Reply
from bot.runtime.settings import Settings
from town.features.consent.forget import UnknownMember, characters_of, find_members, forget
from town.inputs.consent import set_muted
from town.inputs.unit import area_named
from town.llm.moderation import ModerationEndpoint
from town.llm.port import Brain
from town.outbox.moderation import Blocklist, Check, ModeratedBrain, read_blocklist
from town.outbox.switches import MODES, set_switch, switches
from town.store.db import Store
from town.text import echoed
from town.tick.engine import Engine
from town.world.load import town_folder
from town.world.persona import PersonaError
from town.world.places import World

CONFIRM = "confirm"
DEPARTURES = ("ban", "kick", "leave")
WHAT_GOES = (
    "your visitor rows, the words you said, every resident's memory that holds or quotes you, "
    "their vectors, your lines in replays; the audit log keeps a row for each message with "
    "your name and words taken out"
)


def replay_paths(data_dir: Path) -> list[Path]:
    """Where the town's replays are written: ``bottown simulate``'s folder and the demo's."""
    return [data_dir / "replays", data_dir / "replay.jsonl", data_dir / "demo" / "replay.jsonl"]


def leaving_forgets(rule: str) -> frozenset[str]:
    """The departures (ban, kick, leave) that forget a member under ``forget_on_leave``."""
    words = {w.strip() for w in rule.split(",") if w.strip()}
    return frozenset(w for w in words if w in DEPARTURES)


@dataclass
class Consent:
    engine: Engine
    replays: Sequence[Path] = ()
    forget_on: frozenset[str] = field(default_factory=lambda: frozenset({"ban", "kick"}))

    async def _forget(self, platform: str, user_id: str, **kw: Any) -> None:
        """Forget the member, and the characters they wrote as through a proxy bot; raises
        ``UnknownMember`` when the town holds nothing of either."""
        with self.engine.store.session() as session:
            also = characters_of(session, self.engine.town_id, platform, user_id)
        try:
            await forget(self.engine, platform, user_id, replays=self.replays, **kw)
        except UnknownMember:
            if not also:
                raise
        kw.pop("names", None)
        for character in also:
            await forget(self.engine, platform, character, replays=self.replays, **kw)

    async def forget_me(self, caller: Caller, args: list[str]) -> Reply:
        if [a.lower() for a in args] != [CONFIRM]:
            return Reply(
                f"forget-me erases what the town keeps of you: {WHAT_GOES}. The residents will "
                f"no longer know you. It cannot be undone. To go on: forget-me {CONFIRM}",
                True,
                confirm=f"forget-me {CONFIRM}",
                confirm_label="Forget me",
            )
        try:
            await self._forget(caller.platform, caller.user_id, names=[caller.display_name])
        except UnknownMember:
            return Reply("The town holds nothing of you; nothing was changed.", True)
        return Reply("Done: the town has forgotten you.", True)

    async def forget_member(self, caller: Caller, args: list[str]) -> Reply:
        who = " ".join(args).strip()
        if not who:
            raise ValueError("forget whom? a name, a mention, or platform:id")
        found = await asyncio.to_thread(self._find, who)
        if not found:
            return Reply(
                f"Nobody called {echoed(who)!r} is known to the town; nothing was changed.", True
            )
        if len(found) > 1:
            ids = ", ".join(f"{p}:{u}" for p, u in found)
            return Reply(
                f"{echoed(who)!r} could be any of {ids}; name one (forget {found[0][0]}:...).",
                True,
            )
        ((platform, user_id),) = found
        await self._forget(platform, user_id, reason="admin")
        return Reply(f"Done: the town has forgotten {echoed(who)}.", True)

    def _find(self, who: str) -> list[tuple[str, str]]:
        with self.engine.store.session() as session:
            return find_members(session, self.engine.town_id, who)

    async def mute(self, caller: Caller, args: list[str]) -> Reply:
        changed = await asyncio.to_thread(
            set_muted, self.engine, caller.platform, caller.user_id, True
        )
        text = (
            "Muted: the residents no longer hear or answer you; your messages are kept only "
            "in the audit log. Commands still work; unmute undoes it."
        )
        return Reply(text if changed else "You were muted already.", True)

    async def unmute(self, caller: Caller, args: list[str]) -> Reply:
        changed = await asyncio.to_thread(
            set_muted, self.engine, caller.platform, caller.user_id, False
        )
        text = "Unmuted: the residents hear you again."
        return Reply(text if changed else "You were not muted.", True)

    async def channel(self, caller: Caller, args: list[str]) -> Reply:
        if not args or args[0].lower() not in MODES:
            raise ValueError(f"say how the channel is: {', '.join(MODES)}")
        mode, place = args[0].lower(), " ".join(args[1:]) or caller.location or ""
        if not place:
            raise ValueError("which place? use this in a place's channel, or name one")
        area = await asyncio.to_thread(self._switch, place, mode)
        return Reply(f"{area}'s channel is now {mode}.", True)

    def _switch(self, place: str, mode: str) -> str:
        engine = self.engine
        with engine.unit(changes_town=False) as session:
            area = area_named(World.load(session, engine.town_id, engine.spec), place)
            set_switch(session, engine.town_id, area, mode)
            return area

    def status_line(self) -> str:
        """The switched channels, for ``status`` ("" when every channel is open)."""
        with self.engine.store.session() as session:
            found = switches(session, self.engine.town_id)
        if not found:
            return ""
        return "Channels: " + ", ".join(f"{a} {m}" for a, m in sorted(found.items()))

    async def member_left(self, platform: str, user_id: str, how: str, name: str = "") -> bool:
        """A member banned, kicked or gone from the server: forgotten if ``forget_on_leave``
        says so for ``how``; whether they were."""
        if how not in self.forget_on:
            return False
        try:
            await self._forget(platform, user_id, reason=how, names=[name] if name else [])
        except UnknownMember:
            return False
        return True


def moderated(brain: Brain, settings: Settings, folder: str, store: Store, town_id: int) -> Brain:
    """``brain`` with its residents' spoken lines checked (``town.outbox.moderation``) against
    the town folder's ``blocklist.txt``, ``BOTTOWN_BLOCKLIST`` and ``BOTTOWN_MODERATION_URL``;
    the offline brain and a town with none of them are left as they are."""
    words = read_blocklist(settings.blocklist.split(","))
    try:
        listed = town_folder(folder) / "blocklist.txt"
        if listed.is_file():
            words += read_blocklist(listed.read_text(encoding="utf-8").splitlines())
    except PersonaError:
        pass
    checks: list[Check] = [Blocklist(words)] if words else []
    if settings.moderation_url:
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else ""
        checks.append(ModerationEndpoint(settings.moderation_url, key))
    if not checks or brain.name == "offline":
        return brain
    return ModeratedBrain(brain, checks, store, town_id)

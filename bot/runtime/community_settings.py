"""A community's own settings for its town, kept in its ``Community`` row: who its admins are
(the holders of roles it names, besides members with Manage Server), its daily budget (within
the operator's ceiling, ``BOTTOWN_DAILY_TOKEN_BUDGET``), and, through the town's own commands,
its pace (``speed``) and its channel switches (``channel``); the persona it was founded from.

``/town settings`` shows them; ``/town settings admins|budget|pace|channel ...`` changes them
(admins only). The operator's environment gives the defaults and the ceilings, nothing more.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

from adapters.core.ports import Caller, Reply
from bot.runtime.commands import Command
from bot.runtime.run import TownRuntime
from bot.runtime.settings import Settings
from town.outbox.switches import switches
from town.store.models import Community

USAGE = (
    "settings | settings admins <role>... | settings budget <tokens a day> | "
    "settings pace <minutes a tick> [seconds between ticks] | settings channel open|quiet|closed "
    "[place]"
)
HELP = (
    "this town's settings: the roles whose holders are admins (besides Manage Server), the "
    "daily token budget (within the operator's ceiling), the pace, the channel switches"
)
_ROLE = re.compile(r"^<@&(\d+)>$|^(\d{5,20})$")


@dataclass(frozen=True)
class TownChoices:
    """What a community chose for its town (the ``Community.settings`` JSON)."""

    persona: str = ""
    admin_roles: tuple[str, ...] = ()  # role ids
    daily_budget: int | None = None  # tokens a day; None: the operator's default

    @classmethod
    def of(cls, stored: dict[str, Any]) -> TownChoices:
        return cls(
            persona=str(stored.get("persona", "")),
            admin_roles=tuple(str(r) for r in stored.get("admin_roles", ())),
            daily_budget=stored.get("daily_budget"),
        )

    def stored(self) -> dict[str, Any]:
        return {**asdict(self), "admin_roles": list(self.admin_roles)}

    def applied(self, settings: Settings) -> Settings:
        """The operator's settings with these choices, the budget held to the ceiling."""
        ceiling = settings.daily_token_budget
        if self.daily_budget is None:
            return settings
        budget = self.daily_budget if not ceiling else min(self.daily_budget or ceiling, ceiling)
        return settings.model_copy(update={"daily_token_budget": budget})


class Keeper(Protocol):
    """Where the choices are kept and taken up (``bot.runtime.communities.Communities``)."""

    settings: Settings
    admins_are: str  # who a community's admins are on its platform, roles aside

    def community_by_town(self, town_id: int) -> Community: ...

    def choose(self, town_id: int, choices: TownChoices) -> None: ...

    async def restart_soon(self, town_id: int) -> None: ...

    def role_names(self, town_id: int, role_ids: tuple[str, ...]) -> list[str]: ...

    def town_settings_of(self, choices: TownChoices) -> Settings: ...


@dataclass
class _Settings:
    communities: Keeper
    town: TownRuntime

    def choices(self) -> TownChoices:
        row = self.communities.community_by_town(self.town.town_id)
        return TownChoices.of(row.settings)

    async def run(self, caller: Caller, args: list[str]) -> Reply:
        if not args:
            return Reply(self.shown(), private=True)
        what, rest = args[0].lower(), args[1:]
        if what == "pace":
            return await self.town.commands.table["speed"].run(caller, rest)
        if what == "channel":
            return await self.town.commands.table["channel"].run(caller, rest)
        if what == "admins":
            roles = tuple(_role_id(word) for word in rest)
            return await self._change(replace(self.choices(), admin_roles=roles))
        if what == "budget":
            if len(rest) != 1 or not rest[0].isdigit():
                raise ValueError("give the tokens a day (0: the operator's ceiling)")
            return await self._change(replace(self.choices(), daily_budget=int(rest[0]) or None))
        raise ValueError(f"there is no setting {what!r}")

    async def _change(self, choices: TownChoices) -> Reply:
        """Stored, then the town runs again with it (a moment's pause; nothing is lost)."""
        self.communities.choose(self.town.town_id, choices)
        await self.communities.restart_soon(self.town.town_id)
        return Reply("Changed; the town takes it up in a moment.\n" + self._lines(choices), True)

    def shown(self) -> str:
        return "This town's settings:\n" + self._lines(self.choices())

    def _lines(self, choices: TownChoices) -> str:
        settings = self.communities.town_settings_of(choices)
        roles = ", ".join(self.communities.role_names(self.town.town_id, choices.admin_roles))
        budget = settings.daily_token_budget
        ceiling = self.communities.settings.daily_token_budget
        with self.town.store.session() as s:
            modes = switches(s, self.town.town_id)
        channels = ", ".join(f"{area} {mode}" for area, mode in sorted(modes.items()))
        return "\n".join(
            [
                f"- persona: {choices.persona or self.town.town_name}",
                f"- admins: {self.communities.admins_are}"
                + (f", and the roles {roles}" if roles else ""),
                f"- daily budget: {budget or 'no limit'} tokens"
                + (f" (the operator's ceiling: {ceiling})" if ceiling else ""),
                f"- pace: {self.town.pace().describe()}",
                f"- channels: {channels or 'all open'}",
            ]
        )


def _role_id(word: str) -> str:
    found = _ROLE.match(word.strip())
    if found is None:
        raise ValueError(f"{word!r} is not a role: mention it (@Role) or give its id")
    return found.group(1) or found.group(2)


def settings_command(communities: Keeper, town: TownRuntime) -> Command:
    return Command(USAGE, HELP, True, _Settings(communities, town).run)

"""A private confirmation button under an answer (``Reply.confirm``: "forget-me confirm"): only
the member it was shown to can press it, and it runs that command line for them. A dynamic
item, so a button shown before a restart still works after it. It names the server whose town
asked (a direct message has none, and the bot serves many servers' towns)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import discord

PREFIX = "bottown:"
# (the interaction, the line, the server whose town asked: None on a button of before)
Confirmed = Callable[[discord.Interaction[Any], str, int | None], Awaitable[None]]


class ConfirmButton(
    discord.ui.DynamicItem[discord.ui.Button[Any]],
    template=r"bottown:(?P<line>[a-z-]+ confirm):(?P<user>\d+)(?::(?P<guild>\d+))?",
):
    def __init__(
        self, line: str, user_id: int, label: str = "Confirm", guild_id: int | None = None
    ) -> None:
        where = f":{guild_id}" if guild_id is not None else ""
        button: discord.ui.Button[Any] = discord.ui.Button(
            label=label,
            style=discord.ButtonStyle.danger,
            custom_id=f"{PREFIX}{line}:{user_id}{where}",
        )
        super().__init__(button)
        self.line, self.user_id, self.guild_id = line, user_id, guild_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: Any,
    ) -> ConfirmButton:
        label = getattr(item, "label", None) or "Confirm"
        guild = int(match["guild"]) if match["guild"] else None
        return cls(str(match["line"]), int(match["user"]), label, guild)

    async def interaction_check(self, interaction: discord.Interaction[Any]) -> bool:
        return interaction.user.id == self.user_id  # nobody presses it for another

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        confirmed: Confirmed | None = getattr(interaction.client, "confirmed", None)
        if confirmed is not None:
            await confirmed(interaction, self.line, self.guild_id)


def confirm_view(line: str, user_id: int, label: str, guild_id: int | None) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    view.add_item(ConfirmButton(line, user_id, label or "Confirm", guild_id))
    return view

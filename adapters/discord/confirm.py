"""A private confirmation button under an answer (``Reply.confirm``: "forget-me confirm"): only
the member it was shown to can press it, and it runs that command line for them. A dynamic
item, so a button shown before a restart still works after it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import discord

PREFIX = "bottown:"
Confirmed = Callable[[discord.Interaction[Any], str], Awaitable[None]]


class ConfirmButton(
    discord.ui.DynamicItem[discord.ui.Button[Any]],
    template=r"bottown:(?P<line>[a-z-]+ confirm):(?P<user>\d+)",
):
    def __init__(self, line: str, user_id: int, label: str = "Confirm") -> None:
        button: discord.ui.Button[Any] = discord.ui.Button(
            label=label, style=discord.ButtonStyle.danger, custom_id=f"{PREFIX}{line}:{user_id}"
        )
        super().__init__(button)
        self.line, self.user_id = line, user_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: Any,
    ) -> ConfirmButton:
        label = getattr(item, "label", None) or "Confirm"
        return cls(str(match["line"]), int(match["user"]), label)

    async def interaction_check(self, interaction: discord.Interaction[Any]) -> bool:
        return interaction.user.id == self.user_id  # nobody presses it for another

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        confirmed: Confirmed | None = getattr(interaction.client, "confirmed", None)
        if confirmed is not None:
            await confirmed(interaction, self.line)


def confirm_view(line: str, user_id: int, label: str) -> discord.ui.View:
    view = discord.ui.View(timeout=None)
    view.add_item(ConfirmButton(line, user_id, label or "Confirm"))
    return view

"""The bot's permissions: the invite link grants what the town uses, and a missing one is named."""

from __future__ import annotations

import discord

from adapters.discord.rights import INVITE_PERMISSIONS, missing
from standins.discord.wire import BOT_PERMISSIONS


def test_the_invite_grants_what_the_town_uses_reactions_included() -> None:
    granted = discord.Permissions(INVITE_PERMISSIONS)
    assert INVITE_PERMISSIONS == BOT_PERMISSIONS and granted.add_reactions
    assert missing(granted) == []
    assert not granted.administrator and not granted.mention_everyone


def test_a_missing_permission_is_named_with_what_the_town_does_meanwhile() -> None:
    lacking = discord.Permissions(INVITE_PERMISSIONS)
    lacking.manage_webhooks = False
    [line] = missing(lacking)
    assert line.startswith("Manage Webhooks") and "post as the bot" in line
    assert missing(discord.Permissions(administrator=True)) == []

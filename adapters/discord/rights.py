"""The permissions the bot uses in its server, and what it says when one is missing.

The invite link's permissions are exactly these (``INVITE_PERMISSIONS``, the README's link).
Without one, the town still starts and runs on what it can do; ``status`` and the log say
which permission to grant, and what the town does meanwhile.
"""

from __future__ import annotations

import discord

# permission -> (its name in Discord's settings, what the town does without it)
NEEDED: dict[str, tuple[str, str]] = {
    "view_channel": ("View Channels", "the town cannot see its channels"),
    "send_messages": ("Send Messages", "no answers to commands in channels"),
    "read_message_history": (
        "Read Message History",
        "after a failed post, it cannot check whether the post went through (it waits)",
    ),
    "manage_channels": ("Manage Channels", "no new location channels are made"),
    "manage_webhooks": (
        "Manage Webhooks",
        "residents post as the bot, their names in the text",
    ),
    "add_reactions": ("Add Reactions", "no 📬 on a command answered by direct message"),
}
INVITE_PERMISSIONS = discord.Permissions(**dict.fromkeys(NEEDED, True)).value


def missing(permissions: discord.Permissions) -> list[str]:
    """One line per permission the bot lacks: its name, and what the town does without it."""
    if permissions.administrator:
        return []
    return [
        f"{name} (meanwhile {effect})"
        for flag, (name, effect) in NEEDED.items()
        if not getattr(permissions, flag)
    ]

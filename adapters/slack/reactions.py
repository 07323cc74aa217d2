"""Slack's reactions (``reaction_added``, ``reaction_removed``): Slack names an emoji by its
short name (``+1``, ``joy``), the town compares emoji, so the common ones are read back into
emoji; any other stays ``:name:`` (a workspace's custom emoji among them)."""

from __future__ import annotations

SHORT_NAMES = {
    "+1": "👍",
    "thumbsup": "👍",
    "-1": "👎",
    "thumbsdown": "👎",
    "heart": "❤️",
    "joy": "😂",
    "star": "⭐",
    "star2": "🌟",
    "confused": "😕",
    "face_with_rolling_eyes": "🙄",
    "laughing": "😆",
    "satisfied": "😆",
    "smile": "😄",
    "slightly_smiling_face": "🙂",
    "rolling_on_the_floor_laughing": "🤣",
    "heart_eyes": "😍",
    "tada": "🎉",
    "fire": "🔥",
    "clap": "👏",
    "pray": "🙏",
    "eyes": "👀",
    "100": "💯",
    "thinking_face": "🤔",
    "white_check_mark": "✅",
    "disappointed": "😞",
    "unamused": "😒",
    "neutral_face": "😐",
}


def emoji_of(short_name: str) -> str:
    """The emoji a Slack reaction names (its skin tone dropped), or ``:name:``."""
    name = short_name.split("::", 1)[0].strip(":")
    return SHORT_NAMES.get(name, f":{name}:" if name else "")

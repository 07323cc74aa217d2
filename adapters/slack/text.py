"""Slack's text rules: escaping so nothing pings, channel names, and emoji faces."""

from __future__ import annotations

import re
import unicodedata

NAME_LIMIT = 80  # Slack's longest channel name and username
RESIDENT_ICON = ":bust_in_silhouette:"
TOWN_ICON = ":house_with_garden:"


_BROADCAST = re.compile(r"@(?=(?:here|channel|everyone)\b)", re.IGNORECASE)
MARKUP = re.compile(r"<([^<>]*)>")  # Slack's <...> markup, for reading it back


def escape(text: str) -> str:
    """``text`` as Slack shows it literally: ``&``, ``<`` and ``>`` escaped (so ``<!channel>``,
    ``<@U1>`` and ``<!subteam^S1>`` stay text), and a zero-width joiner after the ``@`` of
    ``@here``, ``@channel`` and ``@everyone`` in case a workspace links names."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _BROADCAST.sub("@\u200d", text)


def unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def channel_name(town: str, area: str) -> str:
    """Slack's rules: lowercase letters, digits, ``-`` and ``_``, at most 80 characters."""
    ascii_text = unicodedata.normalize("NFKD", f"{town} {area}").encode("ascii", "ignore")
    slug = re.sub(r"[^a-z0-9_]+", "-", ascii_text.decode().lower()).strip("-_")
    return slug[:NAME_LIMIT].rstrip("-_") or "town"


def numbered(base: str, n: int) -> str:
    if n == 1:
        return base
    suffix = f"-{n}"
    return base[: NAME_LIMIT - len(suffix)].rstrip("-_") + suffix


_SHORTCODES = {
    "😴": "sleeping",
    "🛏": "bed",
    "⏰": "alarm_clock",
    "☕": "coffee",
    "🍵": "tea",
    "🍳": "fried_egg",
    "🥪": "sandwich",
    "🍝": "spaghetti",
    "🍽": "knife_fork_plate",
    "🧁": "cupcake",
    "📖": "book",
    "📚": "books",
    "🔬": "microscope",
    "🔭": "telescope",
    "✍": "writing_hand",
    "📓": "notebook",
    "📝": "memo",
    "💼": "briefcase",
    "💻": "computer",
    "📧": "email",
    "🚶": "walking",
    "🏃": "runner",
    "🏋": "weight_lifter",
    "💬": "speech_balloon",
    "📞": "telephone_receiver",
    "🎉": "tada",
    "🎨": "art",
    "🎵": "musical_note",
    "🎹": "musical_keyboard",
    "🎸": "guitar",
    "🎤": "microphone",
    "🚿": "shower",
    "💭": "thought_balloon",
    "🏠": "house",
    "🌳": "deciduous_tree",
    "🛒": "shopping_trolley",
    "🧹": "broom",
    "🍺": "beer",
    "🍷": "wine_glass",
}


def icon_emoji(author: str, emoji: str) -> str:
    """A ``:shortcode:`` for the poster's face: the author's current emoji where Slack knows it."""
    if not author:
        return TOWN_ICON
    for char in emoji:
        code = _SHORTCODES.get(char)
        if code:
            return f":{code}:"
    return RESIDENT_ICON

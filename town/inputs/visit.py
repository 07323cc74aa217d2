"""A visitor's words as they come from a platform: one value, from the adapters to the town.

``Visit`` is what an adapter knows of a message in a location channel (where, who, what, and
on which platform); ``words_of`` is what the town keeps of it, and refuses a message with
nothing left once cleaned.
"""

from __future__ import annotations

from dataclasses import dataclass

from town.outbox.chatlog import unpinged
from town.text import clean_text

MAX_WORDS = 2000  # characters of a visitor's words the town keeps (as the audit log does)


class EmptyWords(ValueError):
    """A message with nothing to hear once cleaned: spaces, control or invisible characters,
    mention syntax only. The visitor is told; nothing is stored."""

    def __init__(self) -> None:
        super().__init__(
            "say what? the message is empty once cleaned (only spaces, invisible or control "
            "characters, or mentions); write some words"
        )


@dataclass(frozen=True)
class Visit:
    """A visitor's words in an area: who said them (name, role, platform and user id).

    ``connection`` (the web: the peer's address) is rate-limited beside the user id;
    ``replying_to`` is the name the message the visitor replied to was posted under (a Discord
    reply, a Slack thread): a resident of that name present and awake answers, as if named."""

    area: str
    name: str
    words: str
    platform: str = "cli"
    user_id: str = ""
    role: str = ""
    connection: str = ""
    replying_to: str = ""


def words_of(text: str) -> str:
    """The words the town keeps of ``text``: one line, cut, with no mention syntax or mass
    ping. Raises :class:`EmptyWords` when nothing is left."""
    words = unpinged(clean_text(text, MAX_WORDS))
    if not words:
        raise EmptyWords()
    return words

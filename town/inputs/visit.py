"""A visitor's words as they come from a platform: one value, from the adapters to the town.

``Visit`` is what an adapter knows of a message in a location channel (where, who, what, and
on which platform). ``Visit.of`` makes it once, at the adapter's edge, with the words and the
name in the forms the town keeps (``town.text.spoken``): below, nothing cleans them again.
"""

from __future__ import annotations

from dataclasses import dataclass

from town.text import ROLE_LIMIT, EmptyWords, Name, Plain, Spoken, plain, spoken

__all__ = ["EmptyWords", "Visit"]


@dataclass(frozen=True)
class Visit:
    """A visitor's words in an area: who said them (name, role, platform and user id).

    ``connection`` (the web: the peer's address) is rate-limited beside the user id;
    ``replying_to`` is the name the message the visitor replied to was posted under (a Discord
    reply, a Slack thread): a resident of that name present and awake answers, as if named."""

    area: str
    spoken: Spoken
    platform: str
    user_id: str
    role: Plain
    connection: str
    replying_to: str

    @classmethod
    def of(
        cls,
        area: str,
        name: str,
        words: str,
        platform: str = "cli",
        user_id: str = "",
        *,
        role: str = "",
        connection: str = "",
        replying_to: str = "",
    ) -> Visit:
        """The visit of ``name`` saying ``words`` (plain text: the platform's markup already
        read as people see it). Raises :class:`EmptyWords` when the words show nothing once
        cleaned; a visitor with no user id is known by name."""
        said, plain_role = spoken(name, words), plain(role, ROLE_LIMIT)
        return cls(area, said, platform, user_id or said.name, plain_role, connection, replying_to)

    @property
    def name(self) -> Name:
        return self.spoken.name

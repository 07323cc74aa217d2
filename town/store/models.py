"""The tables of a bot town.

Every datetime is timezone-aware UTC. Game times are the town's own clock, stored as UTC: a
town's "07:00" is 07:00 UTC in the database, whatever zone the community lives in.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from town.text import NAME_LIMIT


def utcnow() -> datetime:
    return datetime.now(UTC)


def _json() -> Column[Any]:
    return Column(JSON, nullable=False)


MEMORY_KINDS = ("seed", "observation", "chat", "plan", "reflection", "directive")


class Town(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True, max_length=80)
    scenario: str = Field(default="", max_length=1000)  # the persona folder (name or path)
    clock: datetime
    minutes_per_tick: int = 10
    paused: bool = False
    tick_seconds: float | None = None  # real seconds between ticks; None: the settings' default
    last_tick_at: datetime | None = None  # wall time of the last committed tick
    created_at: datetime = Field(default_factory=utcnow)
    # raised by every tick (and an input that writes a resident's row, Engine.unit): a tick that
    # read it knows from it that no other process's tick changed the town since (TownChanged)
    revision: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    # raised by each live update of the persona folder (``bottown town update``): a running
    # town that sees it raised loads the folder again
    persona_revision: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    # the town as the last live update applied it (a TownSpec as JSON); None: as its folder
    # says (a folder edited since is applied by an update, never by a restart)
    applied_persona: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))


class Community(SQLModel, table=True):
    """A Discord server (or Slack workspace) that founded a town with the shared bot: the
    town it owns, the settings its admins chose, and since when the bot is gone from it."""

    __table_args__ = (UniqueConstraint("platform", "key"),)
    id: int | None = Field(default=None, primary_key=True)
    platform: str = Field(max_length=20)
    key: str = Field(max_length=64)  # the guild's (workspace's) id
    name: str = Field(default="", max_length=100)  # the server's name, as last seen
    town_id: int = Field(foreign_key="town.id", unique=True)
    settings: dict[str, Any] = Field(default_factory=dict, sa_column=_json())
    removed_at: datetime | None = None  # the bot removed from the server: the town paused
    created_at: datetime = Field(default_factory=utcnow)


class Resident(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("town_id", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id", index=True)
    name: str = Field(max_length=NAME_LIMIT)
    persona: dict[str, Any] = Field(default_factory=dict, sa_column=_json())
    location: str = Field(default="", max_length=300)
    action: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    emoji: str = Field(default="", max_length=40)
    summary: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    summary_day: date | None = None
    state: dict[str, Any] = Field(default_factory=dict, sa_column=_json())


class Memory(SQLModel, table=True):
    __table_args__ = (Index("ix_memory_resident_created", "resident_id", "created"),)
    id: int | None = Field(default=None, primary_key=True)
    resident_id: int = Field(foreign_key="resident.id", index=True)
    kind: str = Field(max_length=20)
    text: str = Field(sa_column=Column(Text, nullable=False))
    created: datetime
    last_access: datetime
    importance: int = Field(ge=1, le=10)
    cites: list[int] = Field(default_factory=list, sa_column=_json())
    # a private memory (a seed phrase marked private: a feeling, a secret) is never volunteered
    # to anyone but its subject or a close friend, and never shown on a public page
    private: bool = Field(default=False)


class PlanItem(SQLModel, table=True):
    __table_args__ = (Index("ix_planitem_resident_day", "resident_id", "day"),)
    id: int | None = Field(default=None, primary_key=True)
    resident_id: int = Field(foreign_key="resident.id")
    day: date
    level: str = Field(max_length=10)  # day, hour or action
    parent_id: int | None = Field(default=None, foreign_key="planitem.id", index=True)
    start: datetime
    duration_min: int
    location: str = Field(max_length=300)
    description: str = Field(sa_column=Column(Text, nullable=False))
    emoji: str = Field(default="", max_length=40)
    memory_id: int | None = Field(default=None, foreign_key="memory.id")


class Location(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("town_id", "path"),)
    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id", index=True)
    path: str = Field(max_length=300)  # "Hobbs Cafe: kitchen"
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    rules: list[str] = Field(default_factory=list, sa_column=_json())


class WorldObject(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("town_id", "location", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id", index=True)
    location: str = Field(max_length=300)
    name: str = Field(max_length=120)
    state: str = Field(default="idle", max_length=500)


class Visitor(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("town_id", "platform", "platform_user_id"),)
    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id", index=True)
    platform: str = Field(max_length=20)
    platform_user_id: str = Field(max_length=100)
    display_name: str = Field(max_length=NAME_LIMIT)
    role: str = Field(default="", max_length=200)
    first_seen: datetime = Field(default_factory=utcnow)


class Conversation(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id", index=True)
    location: str = Field(max_length=300)
    participants: list[str] = Field(default_factory=list, sa_column=_json())
    turns: list[dict[str, Any]] = Field(default_factory=list, sa_column=_json())
    started: datetime
    ended: datetime | None = None


class OutboxEvent(SQLModel, table=True):
    """A town event for the platforms, written in the same transaction as the change it shows."""

    __table_args__ = (Index("ix_outbox_pending", "town_id", "delivered_at", "id"),)
    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id")
    channel: str = Field(max_length=300)
    kind: str = Field(max_length=40)
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=_json())
    game_time: datetime
    idempotency_key: str = Field(unique=True, max_length=120)
    created_at: datetime = Field(default_factory=utcnow)
    delivered_at: datetime | None = None


class LlmUsage(SQLModel, table=True):
    """Calls and tokens per town, wall-clock day, task and resident ('' for none)."""

    __table_args__ = (UniqueConstraint("town_id", "day", "task", "resident"),)
    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id")
    day: date
    task: str = Field(max_length=40)
    resident: str = Field(default="", max_length=NAME_LIMIT)
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    fallbacks: int = 0


class ChannelLink(SQLModel, table=True):
    """A town location's channel on one platform, found or created once and then reused.

    ``extra`` holds what the platform needs besides the id (a Discord webhook's id and token)."""

    __table_args__ = (UniqueConstraint("town_id", "platform", "area"),)
    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id", index=True)
    platform: str = Field(max_length=20)
    area: str = Field(max_length=300)
    channel_id: str = Field(max_length=100)
    extra: dict[str, Any] = Field(default_factory=dict, sa_column=_json())


class Delivery(SQLModel, table=True):
    """One outbox event's delivery to one platform. The row is written ("sending") before the
    post and marked "sent" after it, so a restart never posts a message twice: a row left in
    "sending" by a crash is not sent again (at most once), and is counted as "unknown"."""

    __table_args__ = (UniqueConstraint("outbox_id", "platform"),)
    id: int | None = Field(default=None, primary_key=True)
    outbox_id: int = Field(foreign_key="outboxevent.id", index=True)
    platform: str = Field(max_length=20)
    status: str = Field(max_length=10)  # sending, sent, digested, failed, unknown, skipped
    message_id: str = Field(default="", max_length=200)
    attempts: int = 0
    error: str = Field(default="", max_length=500)
    updated_at: datetime = Field(default_factory=utcnow)


class AuditEntry(SQLModel, table=True):
    """One input to a town (a visitor's words, a command) or one output (a resident's words),
    kept for the platform's records: who, where, what, and when in game and wall time."""

    __table_args__ = (Index("ix_auditentry_town_wall", "town_id", "wall_time"),)
    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id")
    direction: str = Field(max_length=3)  # in, out
    kind: str = Field(max_length=20)  # say, command, whisper, said, reply, ...
    platform: str = Field(default="", max_length=20)  # '' for the town's own outputs
    channel: str = Field(default="", max_length=300)  # the town location
    who: str = Field(max_length=200)  # visitor "name (platform:user_id)" or the resident's name
    text: str = Field(sa_column=Column(Text, nullable=False))
    game_time: datetime
    wall_time: datetime = Field(default_factory=utcnow)


class ChatLine(SQLModel, table=True):
    """One line of a visitor's chat at a place: a visitor's words, a resident's answer to a
    visitor, or the town's word to one ("nobody here is awake"). The record residents take in at
    the next tick (``town.tick.heard``), the thread an answer continues (``town.inputs.chat``)
    and the web page's history read; the audit log only records."""

    __table_args__ = (
        Index("ix_chatline_town_area_thread", "town_id", "area", "thread", "id"),
        Index("ix_chatline_town_game_time", "town_id", "game_time"),
    )
    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id")
    area: str = Field(max_length=300)  # the place (a top-level area: one chat channel)
    speaker: str = Field(max_length=NAME_LIMIT)  # the visitor's name as shown, or the resident's
    kind: str = Field(max_length=10)  # visitor, resident, town
    addressee: str = Field(default="", max_length=NAME_LIMIT)  # who it is said to ("" the room)
    thread: str = Field(max_length=130)  # the visitor's "platform:user id": one chat a place
    platform: str = Field(default="", max_length=20)  # where the visitor wrote it
    # False: not for the next tick to take in (over the visitor's message rate, nobody heard
    # it; or heard at once by a place's own handler, an interview room)
    heard: bool = True
    text: str = Field(sa_column=Column(Text, nullable=False))
    game_time: datetime
    wall_time: datetime = Field(default_factory=utcnow)


class TownLease(SQLModel, table=True):
    """Which worker runs a town. A lease is renewed while its worker lives; an expired one may be
    taken over, and every takeover raises ``epoch`` so a stale owner's tick cannot commit."""

    town_id: int = Field(foreign_key="town.id", primary_key=True)
    worker: str = Field(max_length=100)  # the worker's name
    instance: str = Field(max_length=64)  # one process of that name (a random id)
    epoch: int = 0
    expires_at: datetime
    renewed_at: datetime = Field(default_factory=utcnow)


class WorkerRow(SQLModel, table=True):
    """A live worker process, so two processes cannot run under one name."""

    __tablename__ = "worker"
    name: str = Field(primary_key=True, max_length=100)
    instance: str = Field(max_length=64)
    host: str = Field(default="", max_length=200)
    pid: int = 0
    heartbeat_at: datetime = Field(default_factory=utcnow)


class ForgetOrder(SQLModel, table=True):
    """A member the town is to forget (``town.features.consent``), written before the forget
    begins so a forget a crash interrupted finishes on the next start. Once done, the member's
    identity is cleared from the row: the order records that a forget happened, not whom."""

    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id", index=True)
    platform: str = Field(default="", max_length=20)
    platform_user_id: str = Field(default="", max_length=100)
    names: list[str] = Field(default_factory=list, sa_column=_json())
    phrases: list[str] = Field(default_factory=list, sa_column=_json())  # what they said
    reason: str = Field(default="asked", max_length=20)  # asked, admin, ban, kick, leave
    requested_at: datetime = Field(default_factory=utcnow)
    done_at: datetime | None = None


class MutedMember(SQLModel, table=True):
    """A member who asked the residents neither to hear nor to answer them."""

    __table_args__ = (UniqueConstraint("town_id", "platform", "platform_user_id"),)
    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id", index=True)
    platform: str = Field(max_length=20)
    platform_user_id: str = Field(max_length=100)
    since: datetime = Field(default_factory=utcnow)


class ChannelSwitch(SQLModel, table=True):
    """An admin's switch on one place's channel: ``quiet`` (residents answer visitors but post
    no narration there) or ``closed`` (no resident posts there at all)."""

    __table_args__ = (UniqueConstraint("town_id", "area"),)
    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id", index=True)
    area: str = Field(max_length=300)
    mode: str = Field(max_length=10)  # quiet, closed


class IdCounter(SQLModel, table=True):
    """The next id of a table whose ids are made in Python (``town/store/ids.py``): a tick
    gives its new memories, plan items and conversations their ids while it thinks, with no
    flush, from blocks reserved here in short transactions of their own."""

    __tablename__ = "idcounter"
    name: str = Field(primary_key=True, max_length=40)  # the table
    next_id: int


class PendingInput(SQLModel, table=True):
    """An admin's input that waits for the next tick to start (an inner voice): written at
    once in a short transaction of its own, taken in and deleted by the tick that reads it."""

    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id", index=True)
    resident: str = Field(max_length=NAME_LIMIT)
    kind: str = Field(max_length=20)  # whisper
    text: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class WaitingInput(SQLModel, table=True):
    """What a member did, written by a gateway process that heard it (``bottown gateway``) for
    the process that runs the town: a visitor's words, a reaction (``kind``), as JSON
    (``body``), in the order written."""

    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id", index=True)
    kind: str = Field(max_length=20)  # words, reaction
    body: dict[str, Any] = Field(sa_column=_json())
    created_at: datetime = Field(default_factory=utcnow)


class Reaction(SQLModel, table=True):
    """A member's reaction to a resident's message where it was shown (a Discord emoji, a Slack
    reaction, the web page's thumbs), stored against the message: who said it, which task made
    it, which model, the place and the game time. ``member`` is a pseudonym, never the member's
    platform id (``town.features.ratings.reactions.pseudonym``). A removed reaction is deleted."""

    __table_args__ = (
        UniqueConstraint("outbox_id", "platform", "member", "emoji"),
        Index("ix_reaction_town_wall", "town_id", "wall_time"),
    )
    id: int | None = Field(default=None, primary_key=True)
    town_id: int = Field(foreign_key="town.id")
    outbox_id: int = Field(foreign_key="outboxevent.id", index=True)
    platform: str = Field(max_length=20)
    member: str = Field(max_length=64)
    emoji: str = Field(max_length=80)
    resident: str = Field(max_length=NAME_LIMIT)
    task: str = Field(max_length=20)  # visitor (an answer), conversation, narration
    model: str = Field(default="", max_length=120)  # '' when the message did not record one
    place: str = Field(max_length=300)
    game_time: datetime  # of the message
    wall_time: datetime = Field(default_factory=utcnow)

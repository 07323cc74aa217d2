"""The gather experiment's task inputs and results (Takata et al.): what one agent knows when it
speaks or moves, and what it answers."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from town.llm.schemas import Line, Speech


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class GatherInput(_Model):
    """What one agent of the gather experiment knows when it speaks or moves (no memory)."""

    agent: str
    x: int = Field(ge=0)
    y: int = Field(ge=0)
    size: int = Field(ge=2, description="The field is size x size and wraps around.")
    mission: str
    received: list[str] = Field(default_factory=list, description="Empty: No Messages.")


class GatherMemoryInput(GatherInput):
    """The same, with memories retrieved from the agent's memory stream (``--memory``)."""

    memories: list[str] = Field(default_factory=list)


class GatherMessageResult(_Model):
    message: Speech = Field(min_length=1)


class GatherMoveResult(_Model):
    move: Line = Field(min_length=1, description="The move command, in the agent's own words.")

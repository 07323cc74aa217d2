"""The run's log: one JSON line per agent and step, and which answers were fallbacks."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from town.llm.usage import UsageTally


@dataclass
class AgentStep:
    """One agent in one step: one line of the JSONL log."""

    brain: str
    agents: int
    step: int
    agent: str
    x: int
    y: int
    message: str
    heard: list[str]
    heard_from: list[str]
    near_goal: bool
    reply: str
    move: str
    parsed: bool
    to_x: int
    to_y: int
    memories: list[str] = field(default_factory=list)
    fallback: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, line: str) -> AgentStep:
        data: dict[str, Any] = json.loads(line)
        return cls(**data)


def read_log(path: Any) -> list[AgentStep]:
    with open(path, encoding="utf-8") as f:
        return [AgentStep.from_json(line) for line in f if line.strip()]


class CallLedger(UsageTally):
    """A usage tally that also keeps, per task and agent, whether its latest answer came from
    the gateway's offline fallback (an LLM failure), so the log can say so step by step."""

    def __init__(self) -> None:
        super().__init__()
        self.last_fallback: dict[tuple[str, str], bool] = {}

    def record(
        self,
        task: str,
        resident: str | None,
        calls: int,
        prompt_tokens: int,
        completion_tokens: int,
        fallback: bool,
    ) -> None:
        super().record(task, resident, calls, prompt_tokens, completion_tokens, fallback)
        if resident is not None:
            self.last_fallback[(task, resident)] = fallback

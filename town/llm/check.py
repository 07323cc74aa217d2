"""``bottown llm check``: the town's own tasks on small inputs, through the chain the town thinks
with (streamed, in the mode the server takes, the speech cleaned), and a plain verdict: the share
the model would answer, by task, the mode and pace the server takes, or the setting to fix
(never the key).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from town.llm import schemas as s
from town.llm.chain import Handles, think_with
from town.llm.client import open_client
from town.llm.structured import WHY
from town.llm.task import Task
from town.llm.tasks import EMOJI, PLAN_DAY, RATE_IMPORTANCE, REACT, UTTER
from town.llm.usage import UsageTally

PROBE = s.RateImportanceInput(
    resident="Isabella Rodriguez",
    observations=[
        "Isabella Rodriguez is opening Hobbs Cafe",
        "the cafe's fridge is empty",
        "Klaus Mueller asks Isabella to help him move house",
    ],
)
"""The first question: three observations to rate, so a valid reply shows the server holds a
model to an exact count and a range (one score each, 1 to 10)."""
PROBES: tuple[tuple[Task[Any, Any], BaseModel], ...] = (
    (RATE_IMPORTANCE, PROBE),
    (
        REACT,
        s.ReactInput(
            resident="Isabella Rodriguez",
            current_action="serving coffee at the counter",
            observation='Alice (a visitor) says: "Hi Isabella, what time does the party start?"',
            relationship="Isabella does not know Alice yet.",
            context=["Isabella is hosting a Valentine's Day party at Hobbs Cafe, 5-7 pm."],
            present=["Klaus Mueller"],
        ),
    ),
    (
        PLAN_DAY,
        s.PlanDayInput(
            resident="Isabella Rodriguez",
            summary="Isabella Rodriguez owns Hobbs Cafe and is planning a Valentine's party.",
            yesterday="Isabella opened the cafe and told regulars about the party.",
            date="Tuesday February 14, 2023",
            wake_time="06:00",
            routine=["07:00 open Hobbs Cafe", "13:00 have lunch", "20:00 close the cafe"],
            places=["Hobbs Cafe", "Isabella Rodriguez's apartment", "Johnson Park"],
        ),
    ),
    (EMOJI, s.EmojiInput(action="brewing coffee and serving pastries")),
    (
        UTTER,
        s.UtterInput(
            speaker="Isabella Rodriguez",
            listener="Klaus Mueller",
            speaker_summary="Isabella Rodriguez is the friendly owner of Hobbs Cafe.",
            relationship="Klaus is a regular at the cafe.",
            memories=["Isabella is planning a Valentine's Day party at Hobbs Cafe"],
            location="Hobbs Cafe",
        ),
    ),
)
MOSTLY = 0.5
"""The check fails when the model would answer less than this share of the town's thoughts."""

FIXES = {
    "API key rejected": "the server rejected the API key: check BOTTOWN_LLM_API_KEY",
    "model not found": (
        "the server has no model {model!r}: check BOTTOWN_LLM_MODEL (for Ollama: `ollama pull "
        "<model>` first) and that BOTTOWN_LLM_BASE_URL ends in /v1"
    ),
    "no reply": "cannot reach {where}: is the server running? check BOTTOWN_LLM_BASE_URL",
    "timeout": (
        "{where} did not answer within {timeout:g} s: raise BOTTOWN_LLM_TIMEOUT_S for a slow "
        "local model"
    ),
    "HTTP 429": "{where} is rate-limiting this key or its quota is spent (429)",
    "context full": "the server's context window is too small: start it with -c 4096 or more",
}
"""For a check the model answered nothing of: what to fix, by the fallback's reason."""


class LLMUnusable(ValueError):
    """The model answered none of the check's calls, for one reason a setting fixes (the key,
    the model's name, the URL, the timeout): the message says which; ``bottown llm check``
    ends with it, exit 2."""


@dataclass(frozen=True)
class Server:
    """The configured server: its URL (None: the OpenAI API), key, model, timeout and the
    calls it answers at once when it does not say."""

    base_url: str | None
    api_key: str
    model: str
    timeout_s: float
    slots: int = 1


def verdict(handles: Handles, server: Server, tally: UsageTally) -> tuple[bool, str]:
    """(the town can use the server, the lines to print) from what the probes got; raises
    ``LLMUnusable`` when one setting keeps the model from answering anything."""
    where = server.base_url or "the OpenAI API"
    answers = handles.report.as_json()
    by_task = answers["answers_by_task"]
    fallbacks: dict[str, dict[str, int]] = answers["fallbacks_by_task"]
    model_share = 1.0 - answers["fallback_share"]
    lines = [f"{server.model} at {where}:"]
    for task, _inputs in PROBES:
        reasons = fallbacks.get(task.name, {})
        said = "by the model" if by_task[task.name]["fallback"] == 0 else "offline"
        lines.append(f"  {task.name}: {said}" + (f" ({', '.join(reasons)})" if reasons else ""))
    (gateway,) = handles.models
    why = {r for found in fallbacks.values() for r in found}
    if model_share == 0 and len(why) == 1 and (fix := FIXES.get(next(iter(why)))):
        raise LLMUnusable(fix.format(model=server.model, where=where, timeout=server.timeout_s))
    mode = gateway.response_format_kind
    lines.append(handles.server_line())
    lines.append(
        f"The check made {tally.total.calls} calls and spent {tally.total_tokens:,} tokens."
    )
    if model_share < MOSTLY:
        lines.append(
            f"LLM reachable, but the model would answer only {model_share:.0%} of the town's "
            "thoughts: the offline brain would answer most of them; try a larger model "
            "(BOTTOWN_LLM_MODEL)"
        )
        return False, "\n".join(lines)
    lines.append(
        f"LLM OK: the model answers {model_share:.0%} of the town's thoughts, in {mode} mode: "
        f"{WHY[mode]}"
    )
    return True, "\n".join(lines)


async def check_llm(server: Server) -> tuple[bool, str]:
    """(the town can use the server, message). The message says which of the town's thoughts
    the model answers and in which mode; ``LLMUnusable`` says the setting to fix. Neither
    contains the key."""
    client = open_client(server.base_url, server.api_key, server.timeout_s, max_retries=0)
    tally = UsageTally()
    brain, handles = think_with(client, server.model, slots=server.slots, usage=tally)
    try:
        for task, inputs in PROBES:
            await brain.run(task, inputs)
    finally:
        await client.close()
    return verdict(handles, server, tally)

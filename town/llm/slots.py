"""How many calls a server answers at once, when it says so.

llama.cpp's server reports its slots (``-np``) as ``total_slots`` at ``GET /props``, beside its
OpenAI-compatible routes. Told that, the pacer sends exactly so many calls and keeps the rest in
its own queue, where a visitor's call goes first (:mod:`town.llm.pacing`). Learnt from latency
alone, the limit may run a slot or two past the server's, and the calls past it wait in the
server's queue, ahead of any visitor's. Other servers (llama-cpp-python, Ollama, LM Studio,
hosted APIs) have no such route; their capacity is learnt.
"""

from __future__ import annotations

import logging
from typing import Any

import openai

from town.llm.pacing import Pacer

log = logging.getLogger(__name__)

ASK_TIMEOUT_S = 5.0


def props_url(base_url: object) -> str:
    """``GET /props`` at the server's root: the base URL without its ``/v1``."""
    root = str(base_url).rstrip("/").removesuffix("/v1")
    return f"{root}/props"


async def told_slots(client: openai.AsyncOpenAI) -> int | None:
    """The slots the server says it has (None: it does not say, or could not be asked)."""
    asking = client.with_options(max_retries=0, timeout=ASK_TIMEOUT_S)
    try:
        said: Any = await asking.get(props_url(client.base_url), cast_to=dict)
    except (openai.APIError, ValueError):
        return None
    slots = said.get("total_slots") if isinstance(said, dict) else None
    if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0:
        return slots
    return None


async def ask_once(pacer: Pacer, client: openai.AsyncOpenAI) -> None:
    """Before a pacer's first call: ask the server its slots, and tell the pacer if it says.
    Calls made while the answer comes go at the pacer's starting limit."""
    if pacer.asked:
        return
    pacer.asked = True
    slots = await told_slots(client)
    if slots is not None:
        pacer.told(slots)
        log.info("the LLM server answers %d call%s at once", slots, "" if slots == 1 else "s")

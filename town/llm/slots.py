"""How many calls a server answers at once, when it says so.

llama.cpp's server reports its slots (``-np``; four by default now, with a unified KV cache) as
``total_slots`` at ``GET /props``, and lists them at ``GET /slots``, beside its OpenAI-compatible
routes. Told that, the pacer sends exactly so many calls and keeps the rest in its own queue,
where a visitor's call goes first (:mod:`town.llm.pacing`). Other servers (llama-cpp-python,
Ollama, LM Studio, hosted APIs) have no such route: their slots are the operator's setting
(``BOTTOWN_LLM_SLOTS``; Ollama's is ``OLLAMA_NUM_PARALLEL``, vLLM's ``--max-num-seqs``).
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any
from urllib.parse import urlsplit

import openai

from town.llm.pacing import Pacer

log = logging.getLogger(__name__)

ASK_TIMEOUT_S = 5.0


def default_slots(base_url: str | None, ceiling: int) -> int:
    """The slots of a server that does not say: one for a server on this machine or a private
    network (a local server answers one call at a time), the ``ceiling`` for a hosted API."""
    host = urlsplit(base_url).hostname if base_url else None
    if host is None:
        return ceiling  # the OpenAI API
    if host == "localhost" or host.endswith((".local", ".internal", ".lan")) or "." not in host:
        return 1
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return ceiling
    return 1 if address.is_private or address.is_loopback or address.is_link_local else ceiling


def props_url(base_url: object, route: str = "props") -> str:
    """``GET /props`` (or another route) at the server's root: the base URL without ``/v1``."""
    root = str(base_url).rstrip("/").removesuffix("/v1")
    return f"{root}/{route}"


async def _asked(client: openai.AsyncOpenAI, route: str) -> Any:
    asking = client.with_options(max_retries=0, timeout=ASK_TIMEOUT_S)
    try:
        return await asking.get(props_url(client.base_url, route), cast_to=object)
    except (openai.APIError, ValueError):
        return None


async def told_slots(client: openai.AsyncOpenAI) -> int | None:
    """The slots the server says it has (None: it does not say, or could not be asked)."""
    props = await _asked(client, "props")
    slots = props.get("total_slots") if isinstance(props, dict) else None
    if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0:
        return slots
    listed = await _asked(client, "slots")
    if isinstance(listed, list) and listed and all(isinstance(s, dict) for s in listed):
        return len(listed)
    return None


async def ask_once(pacer: Pacer, client: openai.AsyncOpenAI) -> None:
    """Before a pacer's first call: ask the server its slots, and tell the pacer if it says.
    Calls made while the answer comes wait for it, so none goes out past slots the server
    has not got."""
    if pacer.asked.is_set():
        return
    if pacer.asking:
        await pacer.asked.wait()
        return
    pacer.asking = True
    try:
        slots = await told_slots(client)
        if slots is not None:
            pacer.told(slots)
            log.info("the LLM server answers %d call%s at once", slots, "" if slots == 1 else "s")
    finally:
        pacer.asked.set()

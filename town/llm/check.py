"""``bottown llm check``: one small request to the configured LLM in each structured-output mode,
and a plain verdict: the mode the town will use and why, or the setting to fix (the client's own
error classes read here, in town.llm, where the openai client lives)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import openai

from town.llm import formats
from town.llm.client import open_client
from town.llm.lenient import NoJSON
from town.llm.replies import read_reply
from town.llm.schemas import RateImportanceInput
from town.llm.shapes import max_tokens_for
from town.llm.tasks import RATE_IMPORTANCE

PROBE = RateImportanceInput(
    resident="Isabella Rodriguez",
    observations=[
        "Isabella Rodriguez is opening Hobbs Cafe",
        "the cafe's fridge is empty",
        "Klaus Mueller asks Isabella to help him move house",
    ],
)
"""The check's question: three observations to rate, so a valid reply shows the server holds a
model to an exact count and a range (one score each, 1 to 10)."""


@dataclass(frozen=True)
class Server:
    """The configured server: its URL (None: the OpenAI API), key, model and timeout."""

    base_url: str | None
    api_key: str
    model: str
    timeout_s: float


class _Fatal(Exception):
    """The server cannot be used as configured: the message names the setting to fix."""


def _fatal(error: openai.APIError, server: Server, where: str) -> _Fatal | None:
    if isinstance(error, openai.AuthenticationError):
        return _Fatal(f"{where} rejected the API key (401): check BOTTOWN_LLM_API_KEY")
    if isinstance(error, openai.PermissionDeniedError):
        return _Fatal(f"{where} refused access (403): may this key use {server.model}?")
    if isinstance(error, openai.NotFoundError):
        return _Fatal(
            f"{where} has no model {server.model!r} (404): check BOTTOWN_LLM_MODEL "
            "(for Ollama: `ollama pull <model>` first) and that the URL ends in /v1"
        )
    if isinstance(error, openai.RateLimitError):
        return _Fatal(f"{where} is rate-limiting this key or its quota is spent (429)")
    if isinstance(error, openai.APITimeoutError):
        return _Fatal(
            f"{where} did not answer within {server.timeout_s:g} s: raise "
            "BOTTOWN_LLM_TIMEOUT_S for a slow local model"
        )
    if isinstance(error, openai.APIConnectionError):
        return _Fatal(f"cannot reach {where}: is the server running? check BOTTOWN_LLM_BASE_URL")
    return None


async def _try(client: openai.AsyncOpenAI, server: Server, kind: str, where: str) -> str:
    """``"ok ..."`` or what went wrong in this mode; raises :class:`_Fatal`."""
    schema = RATE_IMPORTANCE.schema_for(PROBE)
    create: Any = client.chat.completions.with_raw_response.create
    began = time.monotonic()
    try:
        raw = await create(
            model=server.model,
            messages=formats.wire(RATE_IMPORTANCE.render(PROBE), kind, schema),
            response_format=formats.response_format(kind, RATE_IMPORTANCE.name, schema),
            max_tokens=max_tokens_for(schema),
        )
    except openai.APIStatusError as error:
        if formats.rejects_format(error):
            return f"rejected (HTTP {error.status_code}: {formats.said(error, 200)})"
        fatal = _fatal(error, server, where)
        if fatal is not None:
            raise fatal from None
        return f"failed (HTTP {error.status_code}: {formats.said(error, 200)})"
    except openai.APIError as error:
        fatal = _fatal(error, server, where)
        raise fatal or _Fatal(f"{where}: {type(error).__name__}") from None
    seconds = time.monotonic() - began
    try:
        reply = read_reply(raw.parse())
    except ValueError:
        return "failed (the reply was not JSON)"
    if reply.problem is not None:
        return f"failed (the reply was not a chat completion: {reply.problem})"
    try:
        RATE_IMPORTANCE.parse(PROBE, reply.content)
    except NoJSON:
        return "ignored (the reply held no JSON)"
    except ValueError:
        return "answered, but not with a valid reply (the gateway would repair or fall back)"
    return f"ok (a valid reply in {seconds:.1f} s)"


async def check_llm(server: Server) -> tuple[bool, str]:
    """(the town can use the server, message). The message names the mode the town will use and
    why, or the setting to fix; it never contains the key."""
    where = server.base_url or "the OpenAI API"
    client = open_client(server.base_url, server.api_key, server.timeout_s, max_retries=0)
    lines = [f"{server.model} at {where}:"]
    chosen = None
    try:
        for kind in formats.FORMATS:
            verdict = await _try(client, server, kind, where)
            lines.append(f"  {kind}: {verdict}")
            if verdict.startswith("ok"):
                chosen = kind
                break
    except _Fatal as fatal:
        return False, str(fatal)
    finally:
        await client.close()
    if chosen is None:
        lines.append(
            "LLM reachable, but no mode gave a valid reply: the offline brain would answer most "
            "calls; try a larger model (BOTTOWN_LLM_MODEL)"
        )
        return False, "\n".join(lines)
    lines.append(f"LLM OK: the town will use {chosen} mode: {formats.WHY[chosen]}")
    if chosen != "json_schema":
        lines.append(
            "A local server that answers one call at a time (llama.cpp, Ollama's default) is "
            "best asked with BOTTOWN_LLM_CONCURRENCY=1 or 2; the town also slows down by itself "
            "when calls time out"
        )
    return True, "\n".join(lines)

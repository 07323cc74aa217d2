"""The openai client every part of bottown uses to reach an OpenAI-compatible server."""

from __future__ import annotations

import httpx2
import openai

from town.llm.structured import names_format


async def _out_of_quota_is_final(response: httpx2.Response) -> None:
    """An account with no quota left gets a 429 like a rate limit, which the client would retry
    in vain: mark it final with ``x-should-retry: false``, a header the client obeys."""
    if response.status_code != 429:
        return
    await response.aread()
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return
    if isinstance(error, dict) and error.get("code") == "insufficient_quota":
        response.headers["x-should-retry"] = "false"


async def _rejected_format_is_final(response: httpx2.Response) -> None:
    """A server that takes no ``json_schema`` format (llama-cpp-python's) answers it with a 500
    naming the format, which the client would retry in vain, seconds of backoff each time,
    before the gateway moves on to the next format: mark it final too."""
    if response.status_code != 500:
        return
    await response.aread()
    if names_format(response.text):
        response.headers["x-should-retry"] = "false"


def open_sync_client(base_url: str | None, api_key: str, timeout: float) -> openai.OpenAI:
    """A blocking ``openai.OpenAI`` for ``base_url`` (None: the OpenAI API), as an embedder
    calls it from its worker threads; the client's own retries."""
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout)


Client = openai.AsyncOpenAI  # what ``open_client`` gives (for annotations outside town.llm)


def open_client(
    base_url: str | None, api_key: str, timeout: float, max_retries: int = 3
) -> openai.AsyncOpenAI:
    """An ``openai.AsyncOpenAI`` for ``base_url`` (None: the OpenAI API): each attempt times out
    after ``timeout`` seconds, and the client retries 408/409/429/5xx, timeouts and lost
    connections ``max_retries`` times with backoff (honouring ``retry-after``), but never an
    exhausted quota or a rejected response format. Close it with ``await client.close()``."""
    hooks = {"response": [_out_of_quota_is_final, _rejected_format_is_final]}
    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key=api_key,
        timeout=timeout,
        max_retries=max_retries,
        http_client=openai.DefaultAsyncHttpxClient(event_hooks=hooks),
    )


def seconds_of(timeout: object) -> float:
    """A client's timeout (a number or an ``httpx`` Timeout) in seconds: its read timeout."""
    if isinstance(timeout, int | float):
        return float(timeout)
    read = getattr(timeout, "read", None)
    return float(read) if isinstance(read, int | float) else 60.0

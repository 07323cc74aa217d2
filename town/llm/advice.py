"""What the log says, once, when a server misbehaves: what it does wrong, and the setting to change
(never the key itself)."""

from __future__ import annotations

import re

API_KEY_SETTING = "BOTTOWN_LLM_API_KEY"
MODEL_SETTING = "BOTTOWN_LLM_MODEL"
BASE_URL_SETTING = "BOTTOWN_LLM_BASE_URL"
SLOTS_SETTING = "BOTTOWN_LLM_SLOTS"
TIMEOUT_SETTING = "BOTTOWN_LLM_TIMEOUT_S"

CONTEXT_FULL = re.compile(r"context (window|length)|maximum context|n_ctx", re.IGNORECASE)
"""An error message saying the prompt does not fit the model's context window."""


def refused(status: int, model: str) -> str:
    """The server refused the key (401), the model (403) or does not have the model (404)."""
    if status == 401:
        return (
            f"LLM rejected the API key (401): set {API_KEY_SETTING} to a valid key; "
            "residents now use the offline brain"
        )
    if status == 403:
        return (
            f"LLM refused access (403) to model {model!r}: check that {API_KEY_SETTING} may use "
            f"it, or set {MODEL_SETTING}; residents now use the offline brain"
        )
    return (
        f"LLM model {model!r} not found ({status}): set {MODEL_SETTING} to a model this server "
        f"offers (and check {BASE_URL_SETTING} ends in /v1); residents now use the offline brain"
    )


def timeouts(slots: int, timeout_s: float) -> str:
    return (
        f"LLM calls time out, {slots} at a time (timeout now {timeout_s:.0f} s): the server is "
        f"too slow for this town or hangs; the offline brain answers for {timeout_s:.0f} s, then "
        f"the LLM is asked again; raise {TIMEOUT_SETTING}, or set {SLOTS_SETTING} to the calls "
        "the server answers at once"
    )


def context_full(status: int, message: str) -> str:
    said = " ".join(message.split())[:160]
    return (
        f"LLM server's context window is too small for the town's prompts (HTTP {status}: "
        f"{said}): start it with a larger one (llama.cpp: -c 4096, llama-cpp-python: "
        "--n_ctx 4096)"
    )


def overrun(completion: int, max_tokens: int) -> str:
    return (
        f"the LLM server ignores max_tokens (a reply of {completion} tokens against a cap of "
        f"{max_tokens}): streamed replies are cut off past it; each is counted as served"
    )

"""The structured-output modes every OpenAI-compatible server takes, most structured first:
``json_schema``; ``json_object`` with a ``schema`` field (llama.cpp's servers make it a grammar),
the schema in the prompt too; ``text``, the schema in the prompt only. Speech is plain text in
every server's mode (``speech``). A server that rejects a mode (HTTP 400, 422 or 500 naming the
response format), or whose replies ignore it, gets the next (docs/llm.md, "Structured output
every server takes").
"""

from __future__ import annotations

import json
import re
from typing import Any

import openai
from openai.types.chat import ChatCompletionMessageParam

from town.llm import speech
from town.llm.task import Message

FORMATS = ("json_schema", "json_object", "text")
SPEECH = "speech"
IGNORED_LIMIT = 3
"""Replies in a row holding no JSON at all after which a mode counts as ignored."""
_REJECTING_STATUS = frozenset({400, 422, 500})
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "grammar", "schema")

WHY = {
    "json_schema": "the server enforces the JSON schema itself",
    "json_object": "the server does not take json_schema response formats but takes json_object "
    "with a schema (as llama.cpp's servers do); the schema is in the prompt too",
    "text": "the server takes no response format; the schema is in the prompt and replies are "
    "read leniently",
}
"""Why the town uses each mode (for ``bottown llm check`` and the log)."""


def rejects_format(error: openai.APIStatusError) -> bool:
    """Whether an error answers the response format rather than the request as a whole."""
    if error.status_code not in _REJECTING_STATUS:
        return False
    return names_format(f"{error.message} {getattr(error, 'param', '')} {error.body}")


def names_format(text: str) -> bool:
    """Whether an error's text names the response format (or the grammar made of it)."""
    return any(word in text.lower() for word in _FORMAT_WORDS)


def said(error: openai.APIStatusError, limit: int = 160) -> str:
    """The error's message on one line, without the client's "Error code: 500 - " prefix."""
    text = " ".join(error.message.split())
    return re.sub(r"^Error code: \d+ - ", "", text)[:limit]


def response_format(kind: str, name: str, schema: dict[str, Any]) -> Any:
    """The ``response_format`` argument for a mode (``openai.omit`` for ``text``)."""
    if kind == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": False},
        }
    if kind == "json_object":
        return {"type": "json_object", "schema": schema}
    return openai.omit


def stop(kind: str) -> Any:
    """The ``stop`` argument for a mode: speech ends with its line."""
    return speech.STOP if kind == SPEECH else openai.omit


def wire(
    messages: list[Message], kind: str, schema: dict[str, Any]
) -> list[ChatCompletionMessageParam]:
    """The messages as sent: outside ``json_schema`` mode the system message ends with the
    schema, since the server will not hold the model to it (or not by itself)."""
    out: list[ChatCompletionMessageParam] = []
    for message in messages:
        content, role = message["content"], message["role"]
        if role == "system":
            if kind not in ("json_schema", SPEECH):
                shown = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
                content = (
                    f"{content}\n\nReply with one JSON object only, matching this JSON schema:"
                    f"\n{shown}"
                )
            out.append({"role": "system", "content": content})
        elif role == "assistant":
            out.append({"role": "assistant", "content": content})
        else:
            out.append({"role": "user", "content": content})
    return out

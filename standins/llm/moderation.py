"""The fake server's ``POST /v1/moderations``, shaped as OpenAI's: ``input`` a string, a list of
strings or a list of text/image parts; one result per input with ``flagged``, every category
and its score. A text holding a flag word is flagged in that word's category, so tests can
drive a moderation verdict; anything else passes."""

from __future__ import annotations

import json
from typing import Any
from uuid import uuid4

from aiohttp import web

from standins.llm import wire

MODEL = "omni-moderation-latest"
FLAG_WORDS = {"snarglebarf": "harassment", "grimblewound": "violence"}
CATEGORIES = (
    "harassment",
    "harassment/threatening",
    "hate",
    "hate/threatening",
    "illicit",
    "illicit/violent",
    "self-harm",
    "self-harm/intent",
    "self-harm/instructions",
    "sexual",
    "sexual/minors",
    "violence",
    "violence/graphic",
)


def _error(message: str, param: str | None = None) -> web.Response:
    body = wire.error_body(message, "invalid_request_error", None, param)
    return web.json_response(body, status=400)


def _texts(value: Any) -> list[str] | None:
    """The texts of an ``input``, or None when it is not one OpenAI takes."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not value:
        return None
    if all(isinstance(v, str) for v in value):
        return list(value)
    texts: list[str] = []
    for part in value:  # multimodal: one result for the whole list
        if not isinstance(part, dict) or part.get("type") not in ("text", "image_url"):
            return None
        if part["type"] == "text":
            if not isinstance(part.get("text"), str):
                return None
            texts.append(part["text"])
    return [" ".join(texts)]


def verdict(text: str) -> dict[str, Any]:
    """One result: flagged in the category of each flag word the text holds."""
    folded = text.casefold()
    hit = {category for word, category in FLAG_WORDS.items() if word in folded}
    return {
        "flagged": bool(hit),
        "categories": {c: c in hit for c in CATEGORIES},
        "category_scores": {c: 0.97 if c in hit else 0.0001 for c in CATEGORIES},
        "category_applied_input_types": {c: ["text"] for c in CATEGORIES},
    }


async def moderations(request: web.Request) -> web.StreamResponse:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _error("The body must be a JSON object.")
    if not isinstance(body, dict) or "input" not in body:
        return _error("you must provide an input", "input")
    texts = _texts(body["input"])
    if texts is None:
        return _error("input must be a string, an array of strings or of parts", "input")
    model = body.get("model", MODEL)
    if not isinstance(model, str):
        return _error("model must be a string", "model")
    return web.json_response(
        {"id": f"modr-{uuid4().hex[:24]}", "model": model, "results": [verdict(t) for t in texts]}
    )

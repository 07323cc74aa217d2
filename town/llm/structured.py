"""Structured output: each task's JSON schema, the modes a server takes it in, and a reply read
against it.

The schema is in the subset every grammar engine enforces: the result model's, with ``$ref``s
inlined, titles and defaults dropped, every property required, then tightened for the inputs by
the task's shaper with these pieces (exact counts, closed sets as ``enum``). The modes, most
structured first: ``json_schema``; ``json_object`` with a ``schema`` field (llama.cpp's servers
make it a grammar), the schema in the prompt too; ``text``, the schema in the prompt only; speech
is plain text in every server's mode (``speech``). A server that rejects a mode (HTTP 400, 422 or
500 naming the response format), or whose replies ignore it, gets the next. A reply is read
leniently: its JSON object found (alone, fenced, inside prose; raw control characters in
strings), then mended where the meaning is clear (numbers as strings, out of range, over-long
text and lists, an enum's case, a value outside a set that may be none); what cannot be mended
is left for validation and a repair (docs/llm.md, "Structured output every server takes").
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from collections.abc import Mapping
from typing import Any, Literal, TypedDict

import openai
from openai.types.chat import ChatCompletionMessageParam
from pydantic import BaseModel

from town.text import cut


class Message(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str


# -- the schema ------------------------------------------------------------------------------

Schema = dict[str, Any]
_DROPPED = frozenset({"title", "default", "$defs"})


def _inline(node: Any, defs: Mapping[str, Any]) -> Any:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(defs[ref.removeprefix("#/$defs/")], defs)
        out = {k: _inline(v, defs) for k, v in node.items() if k not in _DROPPED}
        if out.get("type") == "object" and isinstance(out.get("properties"), dict):
            out["required"] = list(out["properties"])
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    return node


@functools.cache
def _base(model: type[BaseModel]) -> Schema:
    schema = model.model_json_schema()
    inlined: Schema = _inline(schema, schema.get("$defs", {}))
    return inlined


def base_schema(model: type[BaseModel]) -> Schema:
    """The result model's schema, flat and strict (a fresh copy, to tighten freely)."""
    return copy.deepcopy(_base(model))


def prop(schema: Schema, field: str) -> Schema:
    """The schema of one of an object's properties (to tighten it in place)."""
    found: Schema = schema["properties"][field]
    return found


def exactly(array: Schema, count: int) -> None:
    """An array of exactly ``count`` items."""
    array["minItems"] = array["maxItems"] = count


def one_of(text: Schema, values: list[str]) -> None:
    """A closed set: the enum replaces the free text (an empty set leaves it free)."""
    unique = list(dict.fromkeys(v for v in values if v))
    if unique:
        for key in ("maxLength", "minLength", "pattern"):
            text.pop(key, None)
        text["enum"] = unique


_UNBOUNDED_TEXT = 400  # characters assumed for a text with no maxLength (none in our schemas)
_SHORT_TEXT = 32  # a short text may be emoji, several tokens each: a token a character


def _worst_tokens(node: Any) -> float:
    """An upper estimate of the tokens a reply of this schema takes (about 3 characters of text
    a token, syntax counted generously)."""
    if not isinstance(node, dict):
        return 4
    if "enum" in node:
        return 2 + max((len(str(v)) / 2 for v in node["enum"]), default=1)
    if "anyOf" in node:
        return max((_worst_tokens(option) for option in node["anyOf"]), default=4)
    kind = node.get("type")
    if kind == "string":
        chars = float(node.get("maxLength", _UNBOUNDED_TEXT))
        return 2 + (chars if chars <= _SHORT_TEXT else chars / 3)
    if kind == "array":
        return 2 + float(node.get("maxItems", 10)) * (1 + _worst_tokens(node.get("items")))
    if kind == "object":
        props = node.get("properties", {})
        return 2 + sum(3 + len(name) / 3 + _worst_tokens(v) for name, v in props.items())
    return 4


MAX_TOKENS_CEILING = 2000


def max_tokens_for(schema: Schema) -> int:
    """``max_tokens`` for a call: the schema's worst case, so a reply is never cut short by it,
    within ``MAX_TOKENS_CEILING``."""
    return min(MAX_TOKENS_CEILING, math.ceil(_worst_tokens(schema)) + 16)


# -- reading a reply -------------------------------------------------------------------------

_DECODER = json.JSONDecoder(strict=False)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


class NoJSON(ValueError):
    """The reply holds no JSON object at all (the model ignored the format asked for)."""


def load(content: str) -> Any:
    """The JSON value of a reply: the whole text, a fenced block, or the first object in it."""
    text = content.strip()
    try:
        return _DECODER.decode(text)
    except ValueError:
        pass
    for block in _FENCE.findall(text):
        try:
            return _DECODER.decode(block.strip())
        except ValueError:
            continue
    start = text.find("{")
    while start != -1:
        try:
            found, _ = _DECODER.raw_decode(text, start)
        except ValueError:
            found = None
        if isinstance(found, dict):
            return found
        start = text.find("{", start + 1)
    raise NoJSON("the reply holds no JSON object")


def _number(value: Any) -> float | None:
    """A finite number, from a number or a string holding one; else None."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return value
    return None


def _clamp(value: float, schema: dict[str, Any]) -> float:
    low, high = schema.get("minimum"), schema.get("maximum")
    if isinstance(low, int | float):
        value = max(value, low)
    if isinstance(high, int | float):
        value = min(value, high)
    return value


def mend(value: Any, schema: Any) -> Any:
    """``value`` mended to fit ``schema`` where the meaning is clear; the rest left as it is."""
    if not isinstance(schema, dict):
        return value
    if schema.get("type") == "null":
        return None  # nothing else may stand there (no one to talk to)
    if "anyOf" in schema:
        if value is None:
            return None
        options = [o for o in schema["anyOf"] if isinstance(o, dict) and o.get("type") != "null"]
        if len(options) != 1:
            return value
        mended = mend(value, options[0])
        closed = options[0].get("enum")
        if isinstance(closed, list) and mended not in closed:
            return None  # one of a closed set, or none: what is not in the set is none
        return mended
    enum = schema.get("enum")
    if isinstance(enum, list) and isinstance(value, str | int | float):
        if value in enum:
            return value
        folded = {str(v).casefold(): v for v in enum}
        return folded.get(str(value).strip().casefold(), value)
    kind = schema.get("type")
    if kind == "integer":
        number = _number(value)
        if number is not None:
            return round(_clamp(number, schema))
    elif kind == "number":
        number = _number(value)
        if number is not None:
            return _clamp(number, schema)
    elif kind == "string":
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str) and isinstance(schema.get("maxLength"), int):
            return cut(value.strip(), schema["maxLength"])
    elif kind == "boolean" and isinstance(value, str):
        return {"true": True, "false": False, "yes": True, "no": False}.get(
            value.strip().lower(), value
        )
    elif kind == "array":
        if isinstance(value, list):
            items = value[: schema["maxItems"]] if "maxItems" in schema else value
            return [mend(item, schema.get("items")) for item in items]
    elif kind == "object" and isinstance(value, dict):
        props = schema.get("properties", {})
        return {key: mend(item, props.get(key)) for key, item in value.items()}
    return value


# -- the modes -------------------------------------------------------------------------------

FORMATS = ("json_schema", "json_object", "text")
SPEECH = "speech"
STOP = ["\n"]
"""Where the server stops a line of speech."""
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
    return STOP if kind == SPEECH else openai.omit


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

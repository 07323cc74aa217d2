"""Each task's JSON schema, in the subset every grammar engine enforces: the result model's, with
``$ref``s inlined, titles and defaults dropped, every property required, then tightened for the
inputs by the task's shaper with these pieces (exact counts, closed sets as ``enum``); and the
``max_tokens`` its worst reply needs.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

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

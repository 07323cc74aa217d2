"""Lenient reading of a model's reply: find the JSON object (alone, fenced, inside prose; raw
control characters in strings allowed), then mend what has one clear meaning against the call's
schema (numbers as strings, out of range, over-long text and lists, an enum's case, a value
outside a set that may be none). What cannot be mended is left for validation and a repair.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from town.text import cut

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

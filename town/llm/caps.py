"""Length caps on the text a model writes: a validator cuts text to its cap at a natural
boundary (``town.text.cut``)."""

from __future__ import annotations

from town.text import cut


def capped(value: object, limit: int) -> object:
    """A validator's view: text is cut to ``limit`` (stripped first); anything else is left for
    the type check to judge."""
    if isinstance(value, str):
        return cut(value.strip(), limit)
    return value

"""What Slack refuses in a message's Block Kit blocks (the kinds the town sends)."""

from __future__ import annotations

from typing import Any


def blocks_problem(blocks: Any) -> str | None:
    """What Slack would refuse in a message's Block Kit blocks (the kinds the town sends)."""
    if blocks is None:
        return None
    if not isinstance(blocks, list) or not 1 <= len(blocks) <= 50:
        return "blocks must be a list of 1 to 50 blocks"
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "section":
            text = block.get("text") or {}
            if (
                text.get("type") not in ("mrkdwn", "plain_text")
                or not 1 <= len(str(text.get("text") or "")) <= 3000
            ):
                return "a section's text is 1 to 3000 characters"
        elif kind == "actions":
            for element in block.get("elements") or [None]:
                if not isinstance(element, dict) or element.get("type") != "button":
                    return "actions hold buttons here"
                label = element.get("text") or {}
                if label.get("type") != "plain_text" or not 1 <= len(label.get("text", "")) <= 75:
                    return "a button's text is plain_text of 1 to 75 characters"
                if not 1 <= len(str(element.get("action_id") or "")) <= 255:
                    return "a button's action_id is 1 to 255 characters"
                if len(str(element.get("value") or "")) > 2000:
                    return "a button's value is at most 2000 characters"
                if element.get("style") not in (None, "primary", "danger"):
                    return "a button's style is primary or danger"
        else:
            return f"unknown block type {kind!r}"
    return None

"""A private confirmation button under an answer (``Reply.confirm``: "forget-me confirm"), as
Block Kit: the answer's text, then a button whose press (``block_actions``) runs that command
line for the member who pressed it (only they saw the ephemeral answer), answered privately."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.respond.async_respond import AsyncRespond

from adapters.core.ports import Reply

ACTION_ID = "bottown_confirm"
LINES = frozenset({"forget-me confirm"})  # what a button may run
Run = Callable[[str, str, str], Awaitable[Reply]]  # (user, channel, line) -> the answer


def confirm_blocks(reply: Reply, text: str) -> list[dict[str, Any]] | None:
    """The answer's blocks with its button; None for an answer without one."""
    if not reply.confirm:
        return None
    button = {
        "type": "button",
        "action_id": ACTION_ID,
        "text": {"type": "plain_text", "text": (reply.confirm_label or "Confirm")[:75]},
        "style": "danger",
        "value": reply.confirm,
    }
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}},
        {"type": "actions", "elements": [button]},
    ]


class Confirmations:
    def __init__(self, run: Run, escape: Callable[[str], str]) -> None:
        self.run, self.escape = run, escape

    async def on_action(self, ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        actions = body.get("actions") or [{}]
        line = str(actions[0].get("value") or "")
        user = str((body.get("user") or {}).get("id") or "")
        channel = str((body.get("channel") or {}).get("id") or "")
        if line not in LINES or not user:
            return
        reply = await self.run(user, channel, line)
        await respond(
            text=self.escape(reply.text), response_type="ephemeral", replace_original=True
        )

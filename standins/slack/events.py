"""What the fake Slack sends an app over HTTP: events, slash commands and actions to the app's
request URL, signed with its signing secret as Slack signs them (``v0:<timestamp>:<body>``,
HMAC-SHA256), and the two events of an uninstall (``tokens_revoked``, then ``app_uninstalled``).
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from typing import Any
from urllib.parse import urlencode

import aiohttp

from standins.slack.workspace import APP_ID, FakeSlack

_ids = itertools.count(1)


def signed(body: str, secret: str, *, ts: int | None = None) -> dict[str, str]:
    stamp = str(int(time.time()) if ts is None else ts)
    digest = hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256)
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest.hexdigest()}"}


def event_callback(fake: FakeSlack, team_id: str, event: dict[str, Any]) -> dict[str, Any]:
    """An Events API envelope for ``event`` in the workspace, authorized for its bot."""
    team = fake.teams[team_id]
    now = time.time()
    return {
        "token": "legacy",
        "team_id": team_id,
        "api_app_id": APP_ID,
        "type": "event_callback",
        "event_id": f"Ev{next(_ids):08d}",
        "event_time": int(now),
        "event": {"event_ts": f"{now:.6f}", **event},
        "authorizations": [{"team_id": team_id, "user_id": team.bot_user_id, "is_bot": True}],
    }


def slash_command(
    fake: FakeSlack, team_id: str, user: str, channel: str, text: str, name: str
) -> str:
    """``/town <text>`` typed by ``user``: the form body Slack posts (its answer goes to
    ``fake.response_url(name)``)."""
    return urlencode(
        {
            "token": "legacy",
            "team_id": team_id,
            "team_domain": team_id.lower(),
            "channel_id": channel,
            "user_id": user,
            "user_name": user.lower(),
            "command": "/town",
            "text": text,
            "api_app_id": APP_ID,
            "response_url": fake.response_url(name),
            "trigger_id": f"{next(_ids)}.2.3",  # unique per command, as Slack's
        }
    )


async def send(fake: FakeSlack, payload: dict[str, Any] | str, *, form: bool = False) -> int:
    """Post to the app's request URL as Slack does, signed; the app's status."""
    body = payload if isinstance(payload, str) else json.dumps(payload)
    kind = "application/x-www-form-urlencoded" if form else "application/json"
    headers = {"Content-Type": kind, **signed(body, fake.signing_secret)}
    async with (
        aiohttp.ClientSession() as session,
        session.post(fake.request_url, data=body, headers=headers) as response,
    ):
        return response.status


async def uninstalled(fake: FakeSlack, team_id: str) -> list[int]:
    """A workspace admin removes the app: its token revoked, then Slack tells the app
    (``tokens_revoked``, ``app_uninstalled``); the app's statuses."""
    team = fake.uninstall(team_id)
    revoked = {"type": "tokens_revoked", "tokens": {"oauth": [], "bot": [team.bot_user_id]}}
    return [
        await send(fake, event_callback(fake, team_id, revoked)),
        await send(fake, event_callback(fake, team_id, {"type": "app_uninstalled"})),
    ]

"""What the Slack adapter's tests share: signed requests for the adapter's events endpoint, and
what the town heard. The fake Slack (``standins/slack/``) runs on 127.0.0.1; the
adapter is the real slack-bolt AsyncApp with slack_sdk clients."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from typing import Any
from urllib.parse import urlencode

import aiohttp
from sqlmodel import col, select

from adapters.core.delivery import OutboxPump
from adapters.slack.adapter import SlackAdapter
from adapters.slack.text import channel_name
from bot.runtime.run import TownRuntime
from standins.slack.workspace import APP_TOKEN, BOT_TOKEN, BOT_USER_ID, TEAM_ID, FakeSlack
from town.outbox.events import TownEvent, write_outbox
from town.store.models import ChannelLink, Delivery, Memory, OutboxEvent, Resident, Town, Visitor
from town.tick.heard import waiting
from town.tick.state import ResidentState
from town.views import places

SECRET = "test-signing-secret"


MEMBER = "U0MEMBER"


ADMIN = "U0ADMIN"


CAFE = "mini-hobbs-cafe"


_event_ids = itertools.count(1)


def make_adapter(runtime: TownRuntime, fake: FakeSlack, mode: str = "http") -> SlackAdapter:
    return SlackAdapter(
        runtime,
        runtime.store,
        runtime.town_id,
        bot_token=BOT_TOKEN,
        app_token=APP_TOKEN,
        signing_secret=SECRET,
        mode=mode,
        port=0,
        api_url=fake.api_url,
    )


def signed(body: str, *, ts: int | None = None, secret: str = SECRET) -> dict[str, str]:
    stamp = str(int(time.time()) if ts is None else ts)
    base = f"v0:{stamp}:{body}".encode()
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest}"}


def event_callback(event: dict[str, Any]) -> dict[str, Any]:
    return {
        "token": "legacy",
        "team_id": TEAM_ID,
        "api_app_id": "A0TOWN",
        "type": "event_callback",
        "event_id": f"Ev{next(_event_ids):08d}",
        "event_time": int(time.time()),
        "event": {"event_ts": f"{time.time():.6f}", "ts": f"{time.time():.6f}", **event},
        "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
    }


def message(channel: str, text: str, user: str | None = MEMBER, **extra: Any) -> dict[str, Any]:
    return event_callback(
        {"type": "message", "channel": channel, "user": user, "text": text, **extra}
    )


async def post(
    adapter: SlackAdapter,
    payload: dict[str, Any] | str,
    *,
    ts: int | None = None,
    secret: str = SECRET,
    form: bool = False,
) -> int:
    """Deliver a request to the adapter's events endpoint as Slack would, signed; wait until
    the work it handed off is done."""
    status, _ = await post_for_body(adapter, payload, ts=ts, secret=secret, form=form)
    return status


async def post_for_body(
    adapter: SlackAdapter,
    payload: dict[str, Any] | str,
    *,
    ts: int | None = None,
    secret: str = SECRET,
    form: bool = False,
) -> tuple[int, str]:
    body = payload if isinstance(payload, str) else json.dumps(payload)
    kind = "application/x-www-form-urlencoded" if form else "application/json"
    headers = {"Content-Type": kind, **signed(body, ts=ts, secret=secret)}
    async with (
        aiohttp.ClientSession() as session,
        session.post(adapter.events_url, data=body, headers=headers) as response,
    ):
        status, text = response.status, await response.text()
    await adapter.idle()
    return status, text


def slash(text: str, user: str, channel: str, fake: FakeSlack, name: str) -> str:
    return urlencode(
        {
            "token": "legacy",
            "team_id": TEAM_ID,
            "channel_id": channel,
            "user_id": user,
            "user_name": user.lower(),
            "command": "/town",
            "text": text,
            "api_app_id": "A0TOWN",
            "response_url": fake.response_url(name),
            "trigger_id": f"{next(_event_ids)}.2.3",  # unique per command, as Slack's
        }
    )


def heard(runtime: TownRuntime, words: str) -> dict[str, int]:
    """How often each resident has ``words`` in a memory or still in its inbox (asleep)."""
    with runtime.store.session() as s:
        residents = s.exec(select(Resident).where(Resident.town_id == runtime.town_id)).all()
        counts: dict[str, int] = {}
        for row in residents:
            memories = s.exec(
                select(Memory).where(Memory.resident_id == row.id, col(Memory.text).contains(words))
            ).all()
            waits = ResidentState.of(row).inbox + waiting(s, runtime.town_id, row)
            inbox = [item for item in waits if words in item]
            if memories or inbox:
                counts[row.name] = len(memories) + len(inbox)
        return counts


def heard_by(runtime: TownRuntime, words: str) -> set[str]:
    return set(heard(runtime, words))


def heard_count(runtime: TownRuntime, words: str) -> int:
    return sum(heard(runtime, words).values())


async def whereabouts(runtime: TownRuntime, *, awake: bool = False) -> dict[str, list[str]]:
    """The residents in each area (only the awake ones if asked), whatever the town did."""
    seen = await places.whereabouts(runtime.opened.engine)
    found = {
        area: [name for name, _, up in people if up or not awake]
        for area, people in seen.by_area.items()
    }
    return {area: names for area, names in found.items() if names}


async def occupied(runtime: TownRuntime, slack: FakeSlack) -> tuple[str, str, set[str]]:
    """An area with residents in it: (area, its channel id, who is there)."""
    area, here = next(iter((await whereabouts(runtime)).items()))
    return area, slack.channel_id(channel_name("mini", area)), set(here)


def visitors(runtime: TownRuntime) -> list[Visitor]:
    with runtime.store.session() as s:
        return list(s.exec(select(Visitor).where(Visitor.platform == "slack")).all())


def links(runtime: TownRuntime) -> dict[str, str]:
    with runtime.store.session() as s:
        rows = s.exec(select(ChannelLink).where(ChannelLink.platform == "slack")).all()
        return {row.area: row.channel_id for row in rows}


def pump(runtime: TownRuntime, adapter: SlackAdapter, sleeps: list[float]) -> OutboxPump:
    async def no_wait(seconds: float) -> None:
        sleeps.append(seconds)

    return OutboxPump(runtime.store, runtime.town_id, adapter, sleep=no_wait)


def say_in_outbox(runtime: TownRuntime, area: str, resident: str, text: str, key: str) -> None:
    with runtime.store.session() as s:
        clock = s.exec(select(Town)).one().clock
        event = TownEvent("said", area, clock, resident, text, {"emoji": "💬"})
        write_outbox(s, runtime.town_id, key, [event])


def delivery_of(runtime: TownRuntime, text: str) -> Delivery:
    with runtime.store.session() as s:
        outbox = [r for r in s.exec(select(OutboxEvent)).all() if r.payload.get("text") == text]
        assert len(outbox) == 1
        return s.exec(select(Delivery).where(Delivery.outbox_id == outbox[0].id)).one()


def press(fake: FakeSlack, user: str, channel: str, action: dict[str, Any], name: str) -> str:
    """A member presses a button of an ephemeral answer: Slack's ``block_actions`` payload, as
    the form body it posts to the app."""
    payload = {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM_ID},
        "api_app_id": "A0TOWN",
        "token": "legacy",
        "container": {
            "type": "message",
            "message_ts": "1.000001",
            "channel_id": channel,
            "is_ephemeral": True,
        },
        "trigger_id": f"{next(_event_ids)}.7.8",
        "team": {"id": TEAM_ID, "domain": "town"},
        "channel": {"id": channel, "name": "mini-hobbs-cafe"},
        "response_url": fake.response_url(name),
        "actions": [
            {
                "action_id": action["action_id"],
                "block_id": "b1",
                "text": action["text"],
                "value": action["value"],
                "style": action.get("style", "primary"),
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)})

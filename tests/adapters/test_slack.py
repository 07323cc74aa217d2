"""The Slack adapter: the real slack-bolt AsyncApp and slack_sdk clients against a fake Slack on
127.0.0.1 (tests/fakes/slack_api.py). Events and slash commands arrive as signed HTTP requests
on the adapter's own events endpoint, or over a Socket Mode websocket."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from pydantic import SecretStr
from sqlmodel import col, select

from adapters.core.delivery import OutboxPump
from adapters.slack.adapter import SlackAdapter, channel_name, escape, unescape
from bot.runtime.run import TownRuntime, build_adapter
from tests.fakes.slack_api import (
    APP_TOKEN,
    BOT_ID,
    BOT_TOKEN,
    BOT_USER_ID,
    TEAM_ID,
    FakeSlack,
    running_fake_slack,
    wait_for,
)
from town.inputs import query
from town.outbox.events import TownEvent, write_outbox
from town.store.models import ChannelLink, Delivery, Memory, OutboxEvent, Resident, Town, Visitor
from town.tick.state import ResidentState

SECRET = "test-signing-secret"
MEMBER = "U0MEMBER"
ADMIN = "U0ADMIN"
CAFE = "mini-hobbs-cafe"
_event_ids = itertools.count(1)


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """slack_sdk reads http(s)_proxy in either case and ignores NO_PROXY."""
    for key in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with running_fake_slack() as fake:
        fake.add_user(MEMBER, "Alice Baker")
        fake.add_user(ADMIN, "Ada Owner", owner=True)
        yield fake


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


@pytest.fixture
async def adapter(runtime: TownRuntime, slack: FakeSlack) -> AsyncIterator[SlackAdapter]:
    """The adapter in HTTP mode, started (the town at its first minute: everyone at home)."""
    started = make_adapter(runtime, slack)
    await started.start()
    yield started
    await started.stop()


# -- helpers ------------------------------------------------------------------------------------


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
            "trigger_id": "1.2.3",
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
            inbox = [item for item in ResidentState.of(row).inbox if words in item]
            if memories or inbox:
                counts[row.name] = len(memories) + len(inbox)
        return counts


def heard_by(runtime: TownRuntime, words: str) -> set[str]:
    return set(heard(runtime, words))


def heard_count(runtime: TownRuntime, words: str) -> int:
    return sum(heard(runtime, words).values())


async def whereabouts(runtime: TownRuntime, *, awake: bool = False) -> dict[str, list[str]]:
    """The residents in each area (only the awake ones if asked), whatever the town did."""
    seen = await query.whereabouts(runtime.opened.engine)
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


# -- unit: names and escaping -------------------------------------------------------------------


def test_channel_names_follow_slacks_rules() -> None:
    assert channel_name("Smallville", "Hobbs Café: counter!") == "smallville-hobbs-cafe-counter"
    assert channel_name("mini", "Mueller home") == "mini-mueller-home"
    long = channel_name("Town", "A very long place name " * 10)
    assert len(long) <= 80 and long == long.lower() and not long.endswith("-")
    assert channel_name("☕", "🍵") == "town"


def test_escape_neutralises_every_mention() -> None:
    text = "Hey <!channel> <!here> <!everyone> <@U123> <!subteam^S1> @here @Channel @everyone & co"
    out = escape(text)
    assert "<" not in out and ">" not in out
    assert "&lt;!channel&gt;" in out and "&lt;@U123&gt;" in out and "&amp; co" in out
    for word in ("here", "Channel", "everyone"):
        assert f"@{word}" not in out and f"@\u200d{word}" in out
    assert escape("write to me@example.com") == "write to me@example.com"


# -- provisioning -------------------------------------------------------------------------------


async def test_provisioning_twice_creates_nothing_new(
    runtime: TownRuntime, slack: FakeSlack
) -> None:
    slack.add_channel("general", member=True)
    slack.add_channel("random")
    existing = slack.add_channel(CAFE)  # found by name, joined
    old = slack.add_channel("mini-mueller-home", archived=True)  # taken for good: a new name
    first = make_adapter(runtime, slack)
    await first.start()
    await first.stop()

    created = [c.params["name"] for c in slack.called("conversations.create")]
    assert sorted(created) == ["mini-mueller-home-2", "mini-rodriguez-home"]
    assert [c.params["channel"] for c in slack.called("conversations.join")] == [existing]
    assert len(slack.called("conversations.list")) > 1  # paged through
    stored = links(runtime)
    assert stored["Hobbs Cafe"] == existing
    assert stored["Mueller home"] == slack.channel_id("mini-mueller-home-2") != old
    assert stored["Rodriguez home"] == slack.channel_id("mini-rodriguez-home")
    purposes = {
        c.params["channel"]: c.params["purpose"] for c in slack.called("conversations.setPurpose")
    }
    assert set(purposes) == {stored["Mueller home"], stored["Rodriguez home"]}  # the new ones
    assert all("AI personas" in p and len(p) <= 250 for p in purposes.values())
    assert slack.channels[stored["Rodriguez home"]]["purpose"]["value"].startswith("Rodriguez home")
    assert "workspace Town Workspace, 3 location channels" in first.status_line()

    slack.calls.clear()
    second = make_adapter(runtime, slack)
    await second.start()
    await second.stop()
    assert slack.called("conversations.create") == []
    assert slack.called("conversations.join") == []
    assert links(runtime) == stored
    assert len(slack.channels) == 6


# -- inbound ------------------------------------------------------------------------------------


async def test_a_members_message_is_heard_by_the_residents_there(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    occupied = await whereabouts(runtime)
    assert len(occupied) >= 2  # so "not the others" means something
    for n, (area, here) in enumerate(occupied.items()):
        channel = slack.channel_id(channel_name("mini", area))
        status = await post(adapter, message(channel, f"Hello &lt;friends&gt; number {n}!"))
        assert status == 200
        assert heard_by(runtime, f'Alice said: "Hello <friends> number {n}!"') == set(here)
    [visitor] = visitors(runtime)
    assert (visitor.platform_user_id, visitor.display_name) == (MEMBER, "Alice")

    area, here = next(iter(occupied.items()))
    channel = slack.channel_id(channel_name("mini", area))
    await post(adapter, message(channel, "hello <@U0ADMIN>, see <https://x.example|this>"))
    assert heard_by(runtime, 'said: "hello @Ada, see this"') == set(here)
    assert len(slack.called("users.info")) == 2  # each member looked up once, then cached


async def test_a_residents_reply_goes_out_under_its_name(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    for _ in range(3):  # 07:20: the early risers are up
        await runtime.opened.engine.tick()
    sleeps: list[float] = []
    await pump(runtime, adapter, sleeps).deliver_pending()  # the ticks' events first
    slack.messages.clear()
    area, resident = next(
        (area, name)
        for area, here in (await whereabouts(runtime, awake=True)).items()
        for name in here
    )
    channel = slack.channel_id(channel_name("mini", area))
    first_name = resident.split()[0]
    await post(adapter, message(channel, f"{first_name}, how is your morning going?"))
    await pump(runtime, adapter, sleeps).deliver_pending()
    with runtime.store.session() as s:
        said = [
            r.payload
            for r in s.exec(select(OutboxEvent).where(OutboxEvent.kind == "said")).all()
            if r.payload.get("to") == "Alice"
        ]
    assert said, "nobody answered the visitor"
    posted = slack.messages_in(channel_name("mini", area))
    narration = [m for m in posted if m["username"] == "mini"]  # the town's own voice
    assert all(m["icon_emoji"] == ":house_with_garden:" for m in narration)
    spoken = [m for m in posted if m not in narration]
    assert [(m["username"], m["text"]) for m in spoken] == [
        (p["resident"], escape(p["text"])) for p in said
    ]
    for reply in spoken:
        assert reply["icon_emoji"].startswith(":") and reply["icon_emoji"].endswith(":")
        assert reply["link_names"] is False and reply["unfurl_links"] is False


async def test_mentions_in_a_residents_text_never_ping(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    text = "Party! <!channel> @here <!everyone> <@U0ADMIN> <!subteam^S0TEAM|@staff> & friends"
    say_in_outbox(runtime, "Hobbs Cafe", "Isabella Rodriguez", text, "loud")
    await pump(runtime, adapter, []).deliver_pending()
    [posted] = [m for m in slack.messages if "Party!" in m["text"]]
    assert posted["text"] == escape(text)
    assert "<" not in posted["text"] and "@here" not in posted["text"]
    assert "&lt;!channel&gt;" in posted["text"] and "@\u200dhere" in posted["text"]
    assert posted["username"] == "Isabella Rodriguez"
    assert posted["icon_emoji"] == ":speech_balloon:"
    assert delivery_of(runtime, text).message_id == posted["ts"]


async def test_admin_commands_are_for_admins_only(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    cafe = slack.channel_id(CAFE)

    def paused() -> bool:
        with runtime.store.session() as s:
            return s.exec(select(Town)).one().paused

    assert await post(adapter, slash("pause", MEMBER, cafe, slack, "m"), form=True) == 200
    [refused] = slack.responses
    assert refused["response_type"] == "ephemeral"
    assert refused["text"].startswith("Only admins") and not paused()

    assert await post(adapter, slash("pause", ADMIN, cafe, slack, "a"), form=True) == 200
    assert paused() and slack.responses[-1]["name"] == "a"

    # "@bot town look" from the cafe's channel: private, so ephemeral, about this place
    await post(
        adapter,
        event_callback(
            {"type": "app_mention", "channel": cafe, "user": MEMBER, "text": "<@U0BOT> town look"}
        ),
    )
    [look] = slack.ephemerals
    assert look["user"] == MEMBER and look["text"].startswith("Hobbs Cafe: a small cafe")
    await post(
        adapter,
        event_callback(
            {"type": "app_mention", "channel": cafe, "user": ADMIN, "text": "<@U0BOT> resume"}
        ),
    )
    assert not paused()

    # a public reply goes to the channel in the town's name, escaped like everything else
    join = "<@U0BOT> town join Alicia &lt;!channel&gt;-baker"
    await post(
        adapter,
        event_callback({"type": "app_mention", "channel": cafe, "user": MEMBER, "text": join}),
    )
    welcome = slack.messages_in(CAFE)[-1]  # after "resume", also a public answer
    assert welcome["username"] == "mini" and welcome["link_names"] is False
    assert welcome["text"] == "Welcome, Alicia, &lt;!channel&gt;-baker. " + (
        "Residents here will notice what you write."
    )
    assert [(v.display_name, v.role) for v in visitors(runtime)] == [("Alicia", "<!channel>-baker")]


async def test_forged_and_stale_requests_are_rejected(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    _, cafe, here = await occupied(runtime, slack)
    forged = await post(adapter, message(cafe, "forged words"), secret="not-the-secret")
    stale = await post(adapter, message(cafe, "stale words"), ts=int(time.time()) - 6 * 60)
    assert (forged, stale) == (401, 401)
    pause = slash("pause", ADMIN, cafe, slack, "forged")
    assert await post(adapter, pause, form=True, secret="guess") == 401
    assert heard_by(runtime, "words") == set() and visitors(runtime) == []
    assert slack.responses == [] and slack.called("users.info") == []

    assert await post(adapter, message(cafe, "true words")) == 200  # the same path, signed
    assert heard_by(runtime, "true words") == here


async def test_our_own_and_other_bots_messages_are_ignored(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    _, cafe, here = await occupied(runtime, slack)
    ignored = [
        message(cafe, "ours via username", subtype="bot_message", bot_id=BOT_ID, user=None),
        message(cafe, "ours as the bot user", user=BOT_USER_ID),
        message(cafe, "another bot", bot_id="B0OTHER", subtype="bot_message"),
        message(cafe, "an edit", subtype="message_changed"),
        message(cafe, "<@U0BOT> town look"),  # a command, answered by app_mention
    ]
    for payload in ignored:
        assert await post(adapter, payload) == 200
    assert visitors(runtime) == [] and heard_by(runtime, "ours") == set()
    again = message(cafe, "only once please")
    await post(adapter, again)
    await post(adapter, again)  # Slack retries a delivery: heard once
    assert heard_by(runtime, "only once") == here
    assert heard_count(runtime, "only once") == len(here)


async def test_url_verification_and_a_huge_message(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    challenge = {"token": "legacy", "challenge": "c-123", "type": "url_verification"}
    assert await post_for_body(adapter, challenge) == (200, '{"challenge": "c-123"}')
    assert (await post_for_body(adapter, challenge, secret="nope"))[0] == 401

    _, channel, here = await occupied(runtime, slack)
    assert await post(adapter, message(channel, "blah " * 20_000)) == 200  # 100k characters
    assert heard_by(runtime, "blah blah") == here  # heard, cut to the town's limit
    with runtime.store.session() as s:
        longest = max(len(m.text) for m in s.exec(select(Memory)).all())
    assert longest < 2200


async def test_a_long_text_goes_out_in_readable_parts(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    sentences = [f"Sentence {n} is about <!here> and the cafe." for n in range(200)]
    say_in_outbox(runtime, "Hobbs Cafe", "Isabella Rodriguez", " ".join(sentences), "long")
    await pump(runtime, adapter, []).deliver_pending()
    parts = [m["text"] for m in slack.messages_in(CAFE) if "Sentence" in m["text"]]
    # split at 3000 characters before escaping; escaped, far below Slack's 40,000
    assert len(parts) == 3 and all(len(unescape(part)) <= 3000 for part in parts)
    assert " ".join(parts) == escape(" ".join(sentences))  # in order, cut between sentences
    assert all(part.endswith("cafe.") for part in parts)


# -- delivery faults ----------------------------------------------------------------------------


async def test_a_429_is_retried_after_retry_after_and_posted_once(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    sleeps: list[float] = []
    outbox = pump(runtime, adapter, sleeps)
    await outbox.deliver_pending()
    slack.fail("chat.postMessage", status=429, retry_after=7)
    say_in_outbox(runtime, "Hobbs Cafe", "Klaus Mueller", "Slow down, please.", "limited")
    await outbox.deliver_pending()
    tries = [
        c for c in slack.called("chat.postMessage") if c.params["text"] == "Slow down, please."
    ]
    assert len(tries) == 2 and 7.0 in sleeps
    assert len([m for m in slack.messages if m["text"] == "Slow down, please."]) == 1
    assert delivery_of(runtime, "Slow down, please.").status == "sent"

    slack.fail("chat.postMessage", status=500)
    say_in_outbox(runtime, "Hobbs Cafe", "Klaus Mueller", "Still here.", "flaky")
    await outbox.deliver_pending()
    assert len([m for m in slack.messages if m["text"] == "Still here."]) == 1
    assert outbox.stats.retries == 2


async def test_a_lost_channel_is_provisioned_again(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    area, old, here = await occupied(runtime, slack)
    name, speaker = channel_name("mini", area), sorted(here)[0]
    outbox = pump(runtime, adapter, [])

    slack.channels[old]["is_archived"] = True  # archived: a new channel, numbered
    slack.fail("conversations.setPurpose", error="missing_scope")  # (usable without one)
    say_in_outbox(runtime, area, speaker, "Anyone here?", "archived")
    await outbox.deliver_pending()
    [posted] = [m for m in slack.messages if m["text"] == "Anyone here?"]
    renamed = slack.channel_id(f"{name}-2")
    assert posted["channel"] == renamed == links(runtime)[area] != old
    await post(adapter, message(renamed, "found you"))
    assert heard_by(runtime, "found you") == here

    slack.channels[renamed]["is_member"] = False  # someone removed the bot: it joins again
    say_in_outbox(runtime, area, speaker, "Back again.", "kicked")
    await outbox.deliver_pending()
    assert [m["channel"] for m in slack.messages if m["text"] == "Back again."] == [renamed]

    del slack.channels[renamed]  # deleted: found by name no more, so made again
    say_in_outbox(runtime, area, speaker, "Rebuilt.", "deleted")
    await outbox.deliver_pending()
    [rebuilt] = [m for m in slack.messages if m["text"] == "Rebuilt."]
    assert rebuilt["channel"] == slack.channel_id(f"{name}-2") == links(runtime)[area] != renamed
    assert outbox.stats.retries == 0  # each repaired inside one send


async def test_an_unknown_error_is_permanent(
    runtime: TownRuntime, adapter: SlackAdapter, slack: FakeSlack
) -> None:
    slack.fail("chat.postMessage", error="msg_too_long")
    say_in_outbox(runtime, "Hobbs Cafe", "Isabella Rodriguez", "Too long.", "refused")
    await pump(runtime, adapter, []).deliver_pending()
    row = delivery_of(runtime, "Too long.")
    assert row.status == "failed" and "msg_too_long" in row.error


# -- Socket Mode --------------------------------------------------------------------------------


async def test_socket_mode_acks_and_hears_an_event(runtime: TownRuntime, slack: FakeSlack) -> None:
    first = make_adapter(runtime, slack, mode="socket")
    await first.start()  # provisions; no message can arrive before the channels are known
    await first.stop()
    _, channel, here = await occupied(runtime, slack)
    payload = message(channel, "hello over the socket")
    slack.envelopes.append(
        {
            "envelope_id": "env-1",
            "type": "events_api",
            "accepts_response_payload": False,
            "retry_attempt": 0,
            "retry_reason": "",
            "payload": payload,
        }
    )
    adapter = make_adapter(runtime, slack, mode="socket")
    await adapter.start()
    try:
        await wait_for(slack, lambda: slack.acks)
        assert slack.acks[0]["envelope_id"] == "env-1"
        assert [c.token for c in slack.called("apps.connections.open")] == [APP_TOKEN] * 2
        await adapter.idle()
        assert heard_by(runtime, "hello over the socket") == here
        assert adapter.status_line().startswith("Slack: Socket Mode, workspace Town Workspace")
    finally:
        await adapter.stop()


async def test_a_bad_configuration_is_refused(runtime: TownRuntime, slack: FakeSlack) -> None:
    with pytest.raises(ValueError, match="APP_TOKEN"):
        SlackAdapter(runtime, runtime.store, runtime.town_id, bot_token=BOT_TOKEN, mode="socket")
    with pytest.raises(ValueError, match="SIGNING_SECRET"):
        SlackAdapter(runtime, runtime.store, runtime.town_id, bot_token=BOT_TOKEN, mode="http")
    wrong = SlackAdapter(
        runtime,
        runtime.store,
        runtime.town_id,
        bot_token=BOT_TOKEN,
        app_token="xoxb-not-an-app-token",
        api_url=slack.api_url,
    )
    with pytest.raises(Exception, match="not_allowed_token_type"):
        await wrong.start()
    await wrong.stop()


def test_bottown_run_builds_the_slack_adapter(runtime: TownRuntime) -> None:
    runtime.settings = runtime.settings.model_copy(
        update={"slack_bot_token": SecretStr(BOT_TOKEN), "slack_app_token": SecretStr(APP_TOKEN)}
    )
    built = build_adapter("slack", runtime)
    assert isinstance(built, SlackAdapter)
    assert built.status_line() == "Slack: Socket Mode, not connected, 0 location channels"


def test_the_manifest_asks_for_what_the_adapter_uses() -> None:
    yaml = pytest.importorskip("yaml")
    manifest = yaml.safe_load(
        (Path(__file__).parents[2] / "adapters/slack/manifest.yaml").read_text()
    )
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert {
        "chat:write",
        "chat:write.customize",
        "channels:manage",
        "channels:join",
        "channels:read",
        "channels:history",
        "app_mentions:read",
        "users:read",
        "commands",
    } <= scopes
    assert set(manifest["settings"]["event_subscriptions"]["bot_events"]) == {
        "message.channels",
        "app_mention",
    }
    assert [c["command"] for c in manifest["features"]["slash_commands"]] == ["/town"]
    assert manifest["settings"]["socket_mode_enabled"] is True

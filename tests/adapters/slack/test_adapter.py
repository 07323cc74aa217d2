"""The Slack adapter's transport and configuration: Socket Mode, settings, the app manifest."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from adapters.slack.adapter import SlackAdapter
from bot.runtime.live import build_adapter
from bot.runtime.run import TownRuntime
from standins.slack.server import wait_for
from standins.slack.workspace import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.adapters.slack.support import heard_by, heard_count, make_adapter, message, occupied


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
        (Path(__file__).parents[3] / "adapters/slack/manifest.yaml").read_text()
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
        "reactions:read",
    } <= scopes
    assert set(manifest["settings"]["event_subscriptions"]["bot_events"]) == {
        "message.channels",
        "app_mention",
        "user_change",  # a member removed from the workspace is forgotten
        "reaction_added",
        "reaction_removed",
    }
    assert [c["command"] for c in manifest["features"]["slash_commands"]] == ["/town"]
    assert manifest["settings"]["socket_mode_enabled"] is True


async def test_a_disconnect_notice_and_a_redelivery_are_heard_once(
    runtime: TownRuntime, slack: FakeSlack
) -> None:
    adapter = make_adapter(runtime, slack, mode="socket")
    await adapter.start()
    try:
        _, channel, here = await occupied(runtime, slack)
        payload = message(channel, "said just before the refresh")
        envelope = {
            "envelope_id": "env-a",
            "type": "events_api",
            "accepts_response_payload": False,
            "retry_attempt": 0,
            "retry_reason": "",
            "payload": payload,
        }
        await wait_for(slack, lambda: slack.live)
        await slack.send_envelope(envelope)
        await wait_for(slack, lambda: slack.acks)
        await slack.disconnect()  # Slack refreshes the link: the SDK opens a new one
        await wait_for(slack, lambda: slack.sockets == 2 and slack.live)
        again = {**envelope, "envelope_id": "env-b", "retry_attempt": 1, "retry_reason": "timeout"}
        await slack.send_envelope(again)
        await wait_for(slack, lambda: len(slack.acks) == 2)
        await adapter.idle()
        assert heard_by(runtime, "said just before the refresh") == here
        assert heard_count(runtime, "said just before the refresh") == len(here)
    finally:
        await adapter.stop()

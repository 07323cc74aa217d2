"""Posting to Discord: retries, permanent failures, escaped mentions and Discord's name rules."""

from __future__ import annotations

import re
import socket
from types import SimpleNamespace
from typing import Any

import discord
import pytest

from adapters.core.ports import DeliveryError, Outgoing
from adapters.discord.adapter import DiscordAdapter
from adapters.discord.channels import channel_name
from adapters.discord.errors import delivery_error
from adapters.discord.poster import ZWSP, escape_mentions, webhook_name
from standins.discord.server import FakeDiscord
from standins.discord.wire import pinged
from tests.adapters.discord.support import (
    Sleeps,
    add_event,
    assert_no_mentions,
    deliveries,
    links,
    make_adapter,
    pump,
)


async def test_webhook_429_is_retried_and_delivered_exactly_once(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    pump(runtime, adapter).recover()
    await pump(runtime, adapter).deliver_pending()
    hook = links(runtime)["Hobbs Cafe"].extra["webhook_id"]
    before = len(fake.calls_of("POST", rf"/webhooks/{hook}/[^/]+"))
    add_event(runtime, "Hobbs Cafe", "said", "Isabella Rodriguez", "The coffee is ready.")
    limited = {"message": "You are being rate limited.", "retry_after": 0.25, "global": False}
    fake.fail_next(
        "execute_webhook", 429, limited, {"Retry-After": "1", "X-RateLimit-Reset-After": "0.25"}
    )
    # with Discord's edge's Via header discord.py would wait and retry by itself, hidden from
    # the pump and on top of its retries: the poster's session stops it, the pump waits
    fake.fail_next("execute_webhook", 429, {**limited, "retry_after": 0.05}, {"Via": "1.1 google"})
    sleeps = Sleeps()
    worker = pump(runtime, adapter, sleeps)
    assert await worker.deliver_pending() == 1
    assert 0.25 in sleeps.waits and 0.05 in sleeps.waits and worker.stats.retries == 2
    assert len(fake.calls_of("POST", rf"/webhooks/{hook}/[^/]+")) - before == 3
    posted = [m for m in fake.webhook_messages() if m["content"] == "The coffee is ready."]
    assert len(posted) == 1
    assert await pump(runtime, adapter, Sleeps()).deliver_pending() == 0  # nothing doubled
    assert len([m for m in fake.webhook_messages() if m["content"] == "The coffee is ready."]) == 1
    sent = [d for d in deliveries(runtime) if d.message_id == posted[0]["id"]]
    assert len(sent) == 1 and sent[0].status == "sent"


async def test_forbidden_is_permanent(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    pump(runtime, adapter).recover()
    await pump(runtime, adapter).deliver_pending()
    add_event(runtime, "Hobbs Cafe", "said", "Klaus Mueller", "Nobody may read this.")
    fake.fail_next("execute_webhook", 403, {"message": "Cannot execute action", "code": 50024})
    worker = pump(runtime, adapter)
    assert await worker.deliver_pending() == 0 and worker.stats.retries == 0
    failed = [d for d in deliveries(runtime) if d.status == "failed"]
    assert len(failed) == 1 and "403" in failed[0].error


async def test_a_lost_permission_pauses_delivery_and_loses_nothing(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    worker = pump(runtime, adapter)
    await worker.deliver_pending()
    add_event(runtime, "Hobbs Cafe", "said", "Klaus Mueller", "Wait for me.")
    fake.fail_next("execute_webhook", 403, {"message": "Missing Permissions", "code": 50013})
    assert await worker.deliver_pending() == 0 and worker.stats.retries == 0
    assert "Manage Webhooks" in worker.paused and "PAUSED" in adapter.status_line()
    assert not [d for d in deliveries(runtime) if d.status == "failed"]
    fake.clock.now += worker.credentials_retry_s
    assert await worker.deliver_pending() == 1  # the permission is back
    assert [m["content"] for m in fake.webhook_messages()].count("Wait for me.") == 1
    assert worker.paused == "" and "PAUSED" not in adapter.status_line()


async def test_generated_mentions_are_escaped_and_names_sanitised(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    pump(runtime, adapter).recover()
    await pump(runtime, adapter).deliver_pending()
    # each send must carry its own AllowedMentions.none(), not lean on the client's default
    # (a webhook built from a stored URL without the client has none)
    adapter.client.allowed_mentions = None
    role = fake.admin_role_id
    text = f"@everyone and @here: party! <@{fake.owner_id}> <@&{role}> <#{fake.guild_id}>"
    add_event(runtime, "Hobbs Cafe", "said", "Clyde of Discord", text)
    add_event(runtime, "Hobbs Cafe", "object", "", "@here the stove is on fire. " * 150)
    assert await pump(runtime, adapter).deliver_pending() == 2
    posted = [
        m for m in fake.webhook_messages() if "party" in m["content"] or "stove" in m["content"]
    ]
    assert len(posted) == 4  # the long narration in three parts
    for message in posted:
        assert_no_mentions(message)
        assert len(message["content"]) <= 2000
        assert pinged(message["content"], None) == []  # inert even if mentions were allowed
        assert not re.search(r"@(everyone|here)|<@&?\d+>|<#\d+>", message["content"])
    party = posted[0]
    assert f"@{ZWSP}everyone" in party["content"] and "party!" in party["content"]
    assert party["author"]["username"] == "Cl-yde of Disc-ord"
    assert posted[1]["author"]["username"] == runtime.town_name  # the narrator


def test_text_rules() -> None:
    assert webhook_name("Clyde the DISCORD bot") == "Cl-yde the DISC-ORD bot"
    assert webhook_name("  ") == "Town" and webhook_name("", "Minitown") == "Minitown"
    assert webhook_name("a@b#c:d```e") == "a b c d e"
    assert len(webhook_name("x" * 200)) == 80
    assert escape_mentions("@everyone <@123> <@!4> <@&5> <#6>") == (
        f"@{ZWSP}everyone <@{ZWSP}123> <@!{ZWSP}4> <@&{ZWSP}5> <#{ZWSP}6>"
    )
    compact = escape_mentions("@here <@123> <#6>", compact=True)
    assert len(compact) == len("@here <@123> <#6>") and pinged(compact, None) == []
    assert pinged("@here <@123456789012345678>", None) == ["@here", "user:123456789012345678"]
    assert (
        channel_name("Hobbs Cafe") == "hobbs-cafe" and channel_name("Mrs. Moore's") == "mrs-moores"
    )


@pytest.mark.parametrize(
    ("status", "headers", "retry_after", "permanent"),
    [
        (429, {"Retry-After": "3"}, 3.0, False),
        (429, {}, 1.0, False),
        (500, {}, None, False),
        (503, {}, None, False),
        (403, {}, None, True),
        (400, {}, None, True),
    ],
)
def test_http_errors_map_to_delivery_errors(
    status: int, headers: dict[str, str], retry_after: float | None, permanent: bool
) -> None:
    response = SimpleNamespace(status=status, reason="x", headers=headers)
    error = delivery_error(discord.HTTPException(response, {"message": "no", "code": 1}))  # type: ignore[arg-type]
    assert error.retry_after == retry_after and error.permanent is permanent
    assert not error.credentials


def test_a_rejected_token_and_a_lost_permission_are_credentials_problems() -> None:
    for status, code in ((401, 0), (403, 50013), (403, 50001)):
        response = SimpleNamespace(status=status, reason="x", headers={})
        error = delivery_error(discord.HTTPException(response, {"message": "no", "code": code}))  # type: ignore[arg-type]
        assert error.credentials and not error.permanent


async def test_send_to_an_unknown_area_is_permanent(runtime: Any, fake: FakeDiscord) -> None:
    bot = make_adapter(runtime)
    with pytest.raises(DeliveryError) as raised:
        await bot.send(Outgoing("k", "Nowhere", "", "hi"))
    assert raised.value.permanent


async def test_lost_connection_is_a_transient_error(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    monkeypatch.setattr(discord.http.Route, "BASE", f"http://127.0.0.1:{dead}/api/v10")
    with pytest.raises(DeliveryError) as raised:
        await adapter.send(Outgoing("k", "Hobbs Cafe", "Klaus Mueller", "Hello?"))
    assert not raised.value.permanent and raised.value.retry_after is None
    assert "unreachable" in str(raised.value)


def posted(fake: FakeDiscord, text: str) -> int:
    return [m["content"] for m in fake.webhook_messages()].count(text)


@pytest.mark.parametrize(
    "fault",
    [
        {"status": 500, "body": {"message": "Internal Server Error", "code": 0}},
        {"status": 502, "body": {"message": "Bad Gateway", "code": 0}},
        {"status": 503, "body": {"message": "upstream connect error", "code": 0}, "drop": True},
    ],
)
async def test_a_post_stored_before_a_failure_is_found_and_never_posted_twice(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter, fault: dict[str, Any]
) -> None:
    worker = pump(runtime, adapter)
    await worker.deliver_pending()
    add_event(runtime, "Hobbs Cafe", "said", "Klaus Mueller", "Only once, please.")
    fake.fail_next("execute_webhook", stored=True, **fault)
    assert await worker.deliver_pending() == 1
    assert posted(fake, "Only once, please.") == 1  # discord.py did not retry it either
    [message] = [m for m in fake.webhook_messages() if m["content"] == "Only once, please."]
    assert [d.message_id for d in deliveries(runtime) if d.status == "sent"][-1] == message["id"]
    assert len(fake.calls_of("GET", r"/channels/\d+/messages")) == 1


async def test_a_failure_before_the_post_was_stored_posts_it_after_looking(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    worker = pump(runtime, adapter)
    await worker.deliver_pending()
    add_event(runtime, "Hobbs Cafe", "said", "Klaus Mueller", "Not there yet.")
    fake.fail_next("execute_webhook", 500, {"message": "Internal Server Error", "code": 0})
    assert await worker.deliver_pending() == 1
    assert posted(fake, "Not there yet.") == 1 and worker.stats.retries == 1


async def test_a_delivery_run_with_one_failure_in_five_posts_each_event_once(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    worker = pump(runtime, adapter)
    await worker.deliver_pending()
    areas = ("Hobbs Cafe", "Mueller home", "Rodriguez home")
    texts = [f"Line number {n}." for n in range(20)]
    for n, text in enumerate(texts):
        add_event(runtime, areas[n % 3], "said", "Klaus Mueller", text)
    server_error = {"message": "Internal Server Error", "code": 0}
    for n in range(4):  # 4 of 20 first tries store the post, then fail
        fake.fail_next("execute_webhook", 500, server_error, stored=True, drop=n % 2 == 1)
    while await worker.deliver_pending():
        pass
    assert {text: posted(fake, text) for text in texts} == {text: 1 for text in texts}
    assert worker.stats.retries == 4 + fake.throttled  # (a 429 is waited out, not a double)


async def test_a_refused_name_is_retried_once_as_the_town_with_the_name_in_the_text(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    worker = pump(runtime, adapter)
    await worker.deliver_pending()
    add_event(runtime, "Hobbs Cafe", "said", "here", "I am a resident called here.")
    fake.refused_names.add("mister x")
    add_event(runtime, "Hobbs Cafe", "said", "Mister X", "Discord refuses my name today.")
    assert await worker.deliver_pending() == 2
    by_name = {m["author"]["username"]: m["content"] for m in fake.webhook_messages()}
    assert by_name["here (resident)"] == "I am a resident called here."
    assert by_name[runtime.town_name] == "**Mister X:** Discord refuses my name today."
    assert not [d for d in deliveries(runtime) if d.status == "failed"]


async def test_a_token_revoked_mid_run_pauses_and_restored_loses_nothing(
    runtime: Any, fake: FakeDiscord, adapter: DiscordAdapter
) -> None:
    worker = pump(runtime, adapter)
    await worker.deliver_pending()
    fake.token_valid = False  # someone reset the bot token in the Developer Portal
    fake.delete_webhook(links(runtime)["Hobbs Cafe"].extra["webhook_id"])  # needs the bot
    texts = [f"Waiting line {n}." for n in range(4)]
    for text in texts:
        add_event(runtime, "Hobbs Cafe", "said", "Klaus Mueller", text)
    assert await worker.deliver_pending() == 0
    assert "BOTTOWN_DISCORD_TOKEN" in worker.paused and "PAUSED" in adapter.status_line()
    assert not [d for d in deliveries(runtime) if d.status == "failed"]
    fake.token_valid = True  # the new token is set (and the bot restarted with it)
    fake.clock.now += worker.credentials_retry_s
    assert await worker.deliver_pending() == 4
    assert [posted(fake, text) for text in texts] == [1] * 4
    assert links(runtime)["Hobbs Cafe"].extra["webhook_id"] in fake.webhooks  # a webhook again

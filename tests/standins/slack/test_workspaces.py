"""The fake Slack's workspaces and install are as strict as Slack: a token works in its own
workspace only, a code is exchanged once by the app's own credentials and redirect."""

from __future__ import annotations

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from standins.slack.server import running_fake_slack
from standins.slack.workspace import BOT_TOKEN, CLIENT_ID, CLIENT_SECRET, TEAM_ID, FakeSlack

REDIRECT = "http://127.0.0.1:9/slack/oauth_redirect"


async def _code(fake: FakeSlack, user: str, team: str) -> str:
    fake.signed_in = (team, user)
    query = {"client_id": CLIENT_ID, "scope": "chat:write", "state": "s1", "redirect_uri": REDIRECT}
    async with (
        aiohttp.ClientSession() as session,
        session.get(fake.authorize_url, params=query, allow_redirects=False) as page,
    ):
        assert page.status == 302
        where = page.headers["Location"]
    assert where.startswith(REDIRECT) and "state=s1" in where
    return where.split("code=")[1].split("&")[0]


def _error(exc: pytest.ExceptionInfo[SlackApiError]) -> str:
    return str(exc.value.response["error"])


async def test_a_workspace_installs_and_its_token_works_there_only() -> None:
    async with running_fake_slack() as fake:
        fake.redirect_uris = [REDIRECT]
        other = fake.add_team("Other Workspace")
        fake.add_user("U0OTHER", "Olga Other", admin=True, team=other.id)
        fake.add_user("U0HOME", "Hal Home")
        home_channel = fake.add_channel("general", member=True)
        client = AsyncWebClient(base_url=fake.api_url)

        code = await _code(fake, "U0OTHER", other.id)
        with pytest.raises(SlackApiError) as wrong:
            await client.oauth_v2_access(
                client_id=CLIENT_ID, client_secret="nope", code=code, redirect_uri=REDIRECT
            )
        assert _error(wrong) == "bad_client_secret"
        with pytest.raises(SlackApiError) as elsewhere:
            await client.oauth_v2_access(
                client_id=CLIENT_ID, client_secret=CLIENT_SECRET, code=code, redirect_uri="x"
            )
        assert _error(elsewhere) == "bad_redirect_uri"
        code = await _code(fake, "U0OTHER", other.id)
        got = await client.oauth_v2_access(
            client_id=CLIENT_ID, client_secret=CLIENT_SECRET, code=code, redirect_uri=REDIRECT
        )
        assert got["team"]["id"] == other.id and got["authed_user"]["id"] == "U0OTHER"
        token = str(got["access_token"])
        assert token != BOT_TOKEN
        with pytest.raises(SlackApiError) as again:
            await client.oauth_v2_access(
                client_id=CLIENT_ID, client_secret=CLIENT_SECRET, code=code, redirect_uri=REDIRECT
            )
        assert _error(again) == "invalid_code"

        theirs = AsyncWebClient(token=token, base_url=fake.api_url)
        assert (await theirs.auth_test())["team_id"] == other.id
        made = await theirs.conversations_create(name="general")  # its own #general
        with pytest.raises(SlackApiError) as crossed:
            await theirs.chat_postMessage(channel=home_channel, text="hello")
        assert _error(crossed) == "channel_not_found"
        with pytest.raises(SlackApiError) as stranger:
            await theirs.users_info(user="U0HOME")
        assert _error(stranger) == "user_not_found"
        listed = await theirs.conversations_list()
        assert [c["id"] for c in listed["channels"]] == [made["channel"]["id"]]
        home = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
        assert (await home.auth_test())["team_id"] == TEAM_ID

        fake.uninstall(other.id)
        with pytest.raises(SlackApiError) as revoked:
            await theirs.auth_test()
        assert _error(revoked) == "token_revoked"
        with pytest.raises(SlackApiError) as unknown:
            await AsyncWebClient(token="xoxb-made-up", base_url=fake.api_url).auth_test()
        assert _error(unknown) == "invalid_auth"


async def test_the_install_page_refuses_another_app_or_redirect() -> None:
    async with running_fake_slack() as fake:
        fake.redirect_uris = [REDIRECT]
        fake.add_user("U0HOME", "Hal Home")
        fake.signed_in = (TEAM_ID, "U0HOME")
        async with aiohttp.ClientSession() as session:
            for query, why in (
                ({"client_id": "9.9", "redirect_uri": REDIRECT}, "invalid_client_id"),
                ({"client_id": CLIENT_ID, "redirect_uri": "http://evil/"}, "bad_redirect_uri"),
            ):
                async with session.get(fake.authorize_url, params=query) as page:
                    assert (page.status, await page.text()) == (400, why)

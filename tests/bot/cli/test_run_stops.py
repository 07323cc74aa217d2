"""``bottown run``: a start-up failure is one red line and exit 2; SIGTERM stops the town as
Ctrl-C does (everything saved, exit 0)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import discord
import pytest
import yarl
from typer.testing import CliRunner

from bot.cli.main import app
from standins.discord.server import FakeDiscord
from tests.factories import MINITOWN

runner = CliRunner()
MINI = ["--town", "mini", "--persona", str(MINITOWN)]


async def test_a_bad_discord_token_is_one_red_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = await FakeDiscord().start()
    try:
        monkeypatch.setattr(discord.http.Route, "BASE", fake.api_base)
        monkeypatch.setattr(
            discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(fake.gateway_url)
        )
        monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
        monkeypatch.setenv("BOTTOWN_DISCORD_TOKEN", "not-the-token")
        args = ["run", "--platform", "discord", *MINI]
        ran = await asyncio.to_thread(runner.invoke, app, args)
    finally:
        await fake.stop()
    assert ran.exit_code == 2, ran.output
    assert "Traceback" not in ran.output
    (last,) = [line for line in ran.output.splitlines() if line.startswith("error:")]
    assert last.startswith("error: the town could not start: Discord rejected the bot token")


def test_sigterm_stops_the_town_as_ctrl_c_does(tmp_path: Path) -> None:
    env = {**os.environ, "BOTTOWN_EMBEDDER": "hash", "BOTTOWN_BRAIN": "offline"}
    bottown = Path(sys.executable).with_name("bottown")
    town = subprocess.Popen(
        [str(bottown), "run", "--platform", "web", "--port", "0", *MINI],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert town.stdout is not None
        for line in town.stdout:  # until it says it runs
            if "is running" in line:
                break
        else:
            raise AssertionError(f"it never ran: {town.stderr.read() if town.stderr else ''}")
        town.send_signal(signal.SIGTERM)
        _, stderr = town.communicate(timeout=120)
    finally:
        if town.poll() is None:
            town.kill()
    assert town.returncode == 0, stderr
    assert "stopped; the town resumes from its clock" in stderr and "Traceback" not in stderr

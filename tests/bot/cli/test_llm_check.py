"""``bottown llm check`` tries each structured-output mode and names the one the town uses."""

from __future__ import annotations

import json
import urllib.request

import pytest
from typer.testing import CliRunner

from bot.cli.main import app

runner = CliRunner()


def queue_faults(url: str, *faults: str) -> None:
    request = urllib.request.Request(
        url.removesuffix("/v1") + "/_fake/faults",
        data=json.dumps({"queue": list(faults)}).encode(),
        headers={"content-type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=5).read()


@pytest.fixture
def configured(fake_llm: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("BOTTOWN_LLM_BASE_URL", fake_llm)
    monkeypatch.setenv("BOTTOWN_LLM_MODEL", "bottown-fake")
    return fake_llm


def said(output: str) -> str:
    return " ".join(output.split())


def test_a_server_taking_json_schema_is_used_in_that_mode(configured: str) -> None:
    result = runner.invoke(app, ["llm", "check"])
    assert result.exit_code == 0, result.output
    assert "json_schema: ok" in said(result.output)
    assert "the town will use json_schema mode" in said(result.output)
    assert "json_object:" not in result.output  # the first mode that works is the one


def test_a_500_for_json_schema_leads_to_json_object_and_exit_0(configured: str) -> None:
    queue_faults(configured, "reject_json_schema_500")
    result = runner.invoke(app, ["llm", "check"])
    assert result.exit_code == 0, result.output
    text = said(result.output)
    assert "json_schema: rejected (HTTP 500: 1 validation error" in text
    assert "json_object: ok" in text and "the town will use json_object mode" in text
    assert "BOTTOWN_LLM_CONCURRENCY=1 or 2" in text


def test_replies_without_json_in_every_mode_exit_1(configured: str) -> None:
    queue_faults(configured, "no_json", "no_json", "no_json")
    result = runner.invoke(app, ["llm", "check"])
    assert result.exit_code == 1
    text = said(result.output)
    assert text.count("ignored (the reply held no JSON)") == 3
    assert "no mode gave a valid reply" in text and "BOTTOWN_LLM_MODEL" in text

"""``bottown llm check`` makes the town's own calls and says what the town will get."""

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
    text = said(result.output)
    assert "rate_importance: by the model" in text and "utter: by the model" in text
    assert "answers 100% of the town's thoughts, in json_schema mode" in text
    assert "LLM server: 1 call at once, as set (BOTTOWN_LLM_SLOTS)" in text


def test_a_500_for_json_schema_leads_to_json_object_and_exit_0(configured: str) -> None:
    queue_faults(configured, "reject_json_schema_500")
    result = runner.invoke(app, ["llm", "check"])
    assert result.exit_code == 0, result.output
    text = said(result.output)
    assert "in json_object mode" in text and "answers 100% of the town's thoughts" in text


def test_replies_without_json_in_every_mode_exit_1(configured: str) -> None:
    queue_faults(configured, *["no_json"] * 12)
    result = runner.invoke(app, ["llm", "check"])
    reset = urllib.request.Request(configured.removesuffix("/v1") + "/_fake/reset", data=b"{}")
    urllib.request.urlopen(reset, timeout=5).read()  # (faults left unused go with it)
    assert result.exit_code == 1
    text = said(result.output)
    assert "rate_importance: offline (unparseable)" in text
    assert "the offline brain would answer most of them" in text and "BOTTOWN_LLM_MODEL" in text

"""``bottown town draft`` against a real OpenAI-compatible server: llama-cpp-python's with
SmolLM2-135M-Instruct (tests/llama_server.py), which takes json_object with a schema and holds
the model to it with a grammar. One resident and two places: five small pieces (the outline,
two places, the resident, the scenario), each reply bounded by its schema, and at most two
repair rounds. Skipped, like the other llama tests, only where the server cannot be built."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.main import app

pytest_plugins = ["tests.servers", "tests.llama_server"]

runner = CliRunner()


def test_a_drafted_town_passes_check_on_a_small_local_model(
    llama_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("BOTTOWN_LLM_BASE_URL", llama_url)
    monkeypatch.setenv("BOTTOWN_LLM_MODEL", "smollm2-135m")
    monkeypatch.setenv("COLUMNS", "300")
    draft = ["town", "draft", "bakery", "--residents", "1", "--places", "2"]
    result = runner.invoke(app, [*draft, "--describe", "a village bakery on a river"])
    assert result.exit_code == 0, result.output
    assert "LLM smollm2-135m" in result.output
    wrote = re.search(r"\((\d+) pieces, (\d+) repair rounds?; (\d+) LLM calls", result.output)
    assert wrote is not None, result.output
    pieces, rounds, calls = (int(n) for n in wrote.groups())
    assert rounds <= 2 and pieces >= 5
    assert calls >= pieces  # every piece was asked of the model
    checked = runner.invoke(app, ["town", "check", "./bakery"])
    assert checked.exit_code == 0, checked.output
    assert "2 places" in checked.output and "1 residents" in checked.output

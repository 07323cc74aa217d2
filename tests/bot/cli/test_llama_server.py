"""The real `bottown` against a real OpenAI-compatible server: llama-cpp-python's, with
SmolLM2-135M-Instruct on loopback (tests/llama_server.py). A few short runs only: the 135M model
answers in seconds on a busy two-core machine."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.main import app

pytest_plugins = ["tests.servers", "tests.llama_server"]  # tests.servers first: it imports it

runner = CliRunner()


@pytest.fixture
def configured(llama_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The settings a user gives to point the town at the local server."""
    monkeypatch.setenv("BOTTOWN_LLM_BASE_URL", llama_url)
    monkeypatch.setenv("BOTTOWN_LLM_MODEL", "smollm2-135m")  # the server's --model_alias
    monkeypatch.setenv("BOTTOWN_LLM_CONCURRENCY", "2")
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    return llama_url


def alive(url: str) -> bool:
    with urllib.request.urlopen(f"{url}/models", timeout=10) as response:
        return bool(response.status == 200)


def last_json(output: str) -> dict[str, object]:
    found: dict[str, object] = json.loads(output.strip().splitlines()[-1])
    return found


def test_llm_check_names_the_mode_the_town_uses(configured: str) -> None:
    result = runner.invoke(app, ["llm", "check"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "in json_object mode" in text and "plan_day: by the model" in text


def test_a_bench_day_runs_on_the_model(configured: str) -> None:
    bench = ["bench", "town", "--llm", "configured", "--residents", "1", "--hours", "0.5"]
    result = runner.invoke(app, [*bench, "--json"])
    assert result.exit_code == 0, result.output
    figures = last_json(result.output)
    assert figures["response_format"] == "json_object"
    answers = figures["answers_by_task"]
    assert isinstance(answers, dict) and sum(a["model"] for a in answers.values()) > 0
    assert figures["fallback_share"] == 0.0, figures["fallbacks_by_task"]
    assert alive(configured)


def test_a_resident_answers_an_interview_and_a_visitor_on_the_model(configured: str) -> None:
    town = ["--town", "interview-practice"]
    # founded and run a little offline (the bench test runs ticks on the model), then asked
    ran = runner.invoke(app, ["simulate", *town, "--days", "0.01", "--brain", "offline"])
    assert ran.exit_code == 0, ran.output
    asked = runner.invoke(app, ["interview", "Dana Whitfield", "What do you do here?", *town])
    assert asked.exit_code == 0, asked.output
    assert asked.output.strip() and "offline" not in asked.output.lower()
    said = runner.invoke(app, ["say", "Lobby", "Hello, who is here today?", *town])
    assert said.exit_code == 0, said.output
    assert alive(configured)


def test_a_gather_experiment_has_no_fallback(configured: str, tmp_path: Path) -> None:
    gather = ["experiment", "gather", "--agents", "2", "--steps", "1", "--brain", "llm"]
    result = runner.invoke(app, [*gather, "--out", str(tmp_path / "gather")])
    assert result.exit_code == 0, result.output
    assert "from the offline brain" not in result.output

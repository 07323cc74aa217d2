"""``bottown experiment gather`` end to end: offline, over the wire to the fake LLM server, with
LLM failures, with memory, and with bad input."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from bot.cli.experiment import experiment_app, parse_agent_counts
from tests.town.experiments.gather.test_run import fake_admin
from town.experiments.gather.field import GatherConfig
from town.experiments.gather.log import read_log
from town.experiments.gather.run import GatherRun
from town.llm.port import OfflineBrain

PNG = b"\x89PNG\r\n\x1a\n"
runner = CliRunner()


def cli() -> typer.Typer:
    """The sub-app mounted as ``bottown experiment`` mounts it."""
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """bottown"""

    app.add_typer(experiment_app, name="experiment")
    return app


def invoke(*args: str) -> Any:
    return runner.invoke(cli(), ["experiment", "gather", *args])


def test_an_offline_run_writes_the_log_plots_and_table(tmp_path: Path) -> None:
    result = invoke("--agents", "3,6", "--steps", "12", "--seed", "4", "--out", "out")
    assert result.exit_code == 0, result.output
    out = Path("out")
    for n in (3, 6):
        lines = (out / f"log-{n}agents.jsonl").read_text("utf-8").splitlines()
        assert len(lines) == n * 12
        first = json.loads(lines[0])
        assert first["brain"] == "offline brain" and first["step"] == 0
        assert {"x", "y", "message", "heard", "reply", "move", "parsed"} <= set(first)
    for name in ("clusters", "moves", "goal_spread", "diversity", "positions"):
        data = (out / f"{name}.png").read_bytes()
        assert data.startswith(PNG) and len(data) > 5000, name
    summary = (out / "summary.csv").read_text("utf-8").splitlines()
    assert len(summary) == 3 and summary[0].startswith("agents,brain,steps,clustered at end")
    assert all(",offline brain,12," in row for row in summary[1:])
    assert "| 6 | offline brain | 12 |" in (out / "summary.md").read_text("utf-8")
    assert len((out / "series.csv").read_text("utf-8").splitlines()) == 1 + 2 * 13
    meta = json.loads((out / "run.json").read_text("utf-8"))
    assert meta["brain"] == "offline brain" and meta["agents"] == [3, 6] and meta["seed"] == 4
    assert "Gather experiment (offline brain)" in result.output
    again = invoke("--agents", "6", "--steps", "12", "--seed", "4", "--out", "again")
    assert again.exit_code == 0, again.output
    same = Path("again/log-6agents.jsonl").read_text("utf-8")
    assert same == (out / "log-6agents.jsonl").read_text("utf-8")  # the seed fixes the run
    assert read_log(out / "log-6agents.jsonl")[0].agents == 6


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agents", "5,x"], "--agents must be whole numbers"),
        (["--agents", "5,,10"], "--agents must be whole numbers"),
        (["--agents", "0"], "--agents must be whole numbers"),
        (["--steps", "0"], "--steps"),
        (["--brain", "llm"], "--brain llm needs BOTTOWN_LLM_BASE_URL"),
        (["--brain", "smart"], "--brain must be offline or llm"),
        (["--diversity", "vibes"], "--diversity must be one of"),
    ],
)
def test_bad_input_gets_a_clear_error(args: list[str], message: str) -> None:
    result = invoke(*args, "--out", "out")
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
    assert not Path("out").exists()  # refused before anything is written


def test_an_unwritable_out_folder_gets_a_clear_error() -> None:
    Path("a-file").write_text("not a folder", encoding="utf-8")
    result = invoke("--agents", "2", "--steps", "2", "--out", "a-file/out")
    assert result.exit_code == 2
    assert "cannot write to --out a-file/out" in " ".join(result.output.split())
    assert parse_agent_counts(" 5, 10,5 ") == [5, 10]


def test_a_run_against_the_fake_llm_server_goes_over_the_wire(
    fake_llm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOTTOWN_LLM_BASE_URL", fake_llm)
    monkeypatch.setenv("BOTTOWN_LLM_MODEL", "bottown-fake")
    result = invoke("--agents", "4", "--steps", "3", "--seed", "2", "--brain", "llm", "--out", "o")
    assert result.exit_code == 0, result.output
    stats = fake_admin(fake_llm, "/_fake/stats")
    assert stats["by_task"] == {"gather_message": 12, "gather_move": 12}
    sent = stats["last_requests"][-1]
    assert sent["temperature"] == 0.1 and sent["max_tokens"] == 256
    records = read_log("o/log-4agents.jsonl")
    assert {r.brain for r in records} == {"LLM bottown-fake"}
    assert not any(r.fallback for r in records)
    meta = json.loads(Path("o/run.json").read_text("utf-8"))
    assert meta["usage"]["calls"] == 24 and meta["usage"]["fallbacks"] == 0
    offline = asyncio.run(GatherRun(GatherConfig(agents=4, steps=3, seed=2), OfflineBrain()).run())
    assert [(r.message, r.reply, r.to_x, r.to_y) for r in records] == [
        (r.message, r.reply, r.to_x, r.to_y) for r in offline
    ]


def test_llm_failures_are_answered_offline_and_marked_in_the_log(
    fake_llm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOTTOWN_LLM_BASE_URL", fake_llm)
    monkeypatch.setenv("BOTTOWN_LLM_MAX_ATTEMPTS", "1")
    fake_admin(fake_llm, "/_fake/faults", {"queue": ["500"]})
    result = invoke("--agents", "3", "--steps", "2", "--brain", "llm", "--out", "o")
    assert result.exit_code == 0, result.output
    records = read_log("o/log-3agents.jsonl")
    assert sum(r.fallback for r in records) == 1
    assert "1 of 12 answers came from the offline brain" in " ".join(result.output.split())


def test_the_memory_flag_runs_with_memory_streams_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    result = invoke("--agents", "3", "--steps", "3", "--memory", "--out", "m")
    assert result.exit_code == 0, result.output
    records = read_log("m/log-3agents.jsonl")
    assert {r.brain for r in records} == {"offline brain, memory"}
    assert all(r.memories for r in records if r.step > 0)
    assert Path("m/memory.db").stat().st_size > 0
    assert json.loads(Path("m/run.json").read_text("utf-8"))["memory"] is True

"""The ``bottown`` command line, run in-process as a user would type it."""

from __future__ import annotations

import json
import urllib.request
from contextlib import closing
from importlib import metadata
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlmodel import col, select
from typer.testing import CliRunner

from bot.cli.main import app
from bot.runtime.settings import Settings
from bot.runtime.wiring import Services
from tests.factories import MINITOWN
from tests.helpers import overtaking
from town.store.db import Store
from town.store.models import LlmUsage, Memory
from town.tick.engine import Engine

runner = CliRunner()


def queue_faults(url: str, *faults: str) -> None:
    req = urllib.request.Request(
        url.removesuffix("/v1") + "/_fake/faults",
        data=json.dumps({"queue": list(faults)}).encode(),
        headers={"content-type": "application/json"},
    )
    urllib.request.urlopen(req, timeout=5).read()


def fake_stats(url: str) -> dict[str, object]:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/_fake/stats", timeout=5) as resp:
        return dict(json.loads(resp.read()))


def test_help_lists_the_commands() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in (
        "demo",
        "remember",
        "recall",
        "fake-llm",
        "bench",
        "llm",
        "config",
        "experiment",
        "run",
    ):
        assert command in result.output


def test_demo_runs_offline_and_says_so() -> None:
    result = runner.invoke(app, ["demo", "--headless", "--hours", "2"])
    assert result.exit_code == 0, result.output
    assert "OFFLINE BRAIN" in result.output
    assert "12 ticks" in result.output and "#" in result.output
    assert "AI" in result.output  # asked whether she is an AI, Isabella says so
    assert Path("data/demo/replay.jsonl").stat().st_size > 0
    again = runner.invoke(app, ["demo", "--headless", "--hours", "2"])  # each run starts afresh
    assert again.exit_code == 0
    assert "12 ticks" in again.output


def test_demo_through_the_gateway_records_usage(
    fake_llm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOTTOWN_LLM_BASE_URL", fake_llm)
    monkeypatch.setenv("BOTTOWN_LLM_MODEL", "bottown-fake")
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    result = runner.invoke(app, ["demo", "--headless", "--hours", "1"])
    assert result.exit_code == 0, result.output
    assert "LLM bottown-fake via the gateway" in result.output
    stats = fake_stats(fake_llm)
    assert int(str(stats["requests"])) > 5
    store = Store.open("sqlite:///data/demo/bottown.db")
    with store.session() as s:
        rows = s.exec(select(LlmUsage)).all()
    assert {r.task for r in rows} >= {"rate_importance", "plan_day", "decompose", "interview"}
    assert sum(r.prompt_tokens for r in rows) > 0


def test_remember_then_recall(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    founded = runner.invoke(
        app, ["simulate", "--town", str(MINITOWN), "--name", "smallville", "--days", "0.01"]
    )
    assert founded.exit_code == 0, founded.output
    args = ["remember", "Isabella Rodriguez", "Isabella fixed the leaking sink at the cafe"]
    first = runner.invoke(app, [*args, "--importance", "9"])
    assert first.exit_code == 0, first.output
    assert "importance 9" in first.output
    # a first name in any case is the resident of that first name, not a new one
    rated = runner.invoke(app, ["remember", "isabella", "Isabella heard Sam runs for mayor"])
    assert rated.exit_code == 0 and "remembered #" in rated.output
    found = runner.invoke(app, ["recall", "Isabella", "the leaking sink", "--json", "--k", "1"])
    assert found.exit_code == 0, found.output
    assert json.loads(found.output)["text"] == "Isabella fixed the leaking sink at the cafe"
    # the command wrote its vectors before it ended (not left to a timer that dies with it)
    with closing(Services.open(Settings())) as services, services.store.session() as s:
        ids = services.index.ids(services.stream(1).town_collection(s), 1)
        newest = s.exec(select(Memory.id).order_by(col(Memory.id).desc()).limit(2)).all()
    assert set(newest) <= set(ids.tolist())
    # a town or resident that does not exist is refused, never made
    for line in (["remember", "Nobody", "x", "--importance", "3"], ["recall", "Nobody", "x"]):
        unknown = runner.invoke(app, line)
        assert (
            unknown.exit_code == 2 and "no resident named 'Nobody' in smallville" in unknown.output
        )
    bad_kind = runner.invoke(
        app, ["remember", "Isabella", "x", "--kind", "dream", "--importance", "3"]
    )
    assert bad_kind.exit_code == 2 and "unknown memory kind" in bad_kind.output
    elsewhere = runner.invoke(app, ["remember", "Isabella", "x", "--town", "nowhere"])
    assert elsewhere.exit_code == 2 and "no town named 'nowhere'" in elsewhere.output


def test_clear_errors_exit_2() -> None:
    unknown = runner.invoke(app, ["recall", "Nobody", "x"])
    assert unknown.exit_code == 2 and "no town named 'smallville'" in unknown.output
    Path("bottown.toml").write_text('llm_modle = "x"\n')
    typo = runner.invoke(app, ["config"])
    assert typo.exit_code == 2 and "llm_modle: unknown key" in typo.output


def test_corrupt_database_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    Path("data").mkdir()
    Path("data/bottown.db").write_bytes(b"garbage" * 1000)
    result = runner.invoke(app, ["migrate"])
    assert result.exit_code == 2
    assert "corrupt or not a bottown database" in result.output


def test_version_and_a_database_of_a_newer_bottown_refused() -> None:
    shown = runner.invoke(app, ["--version"])
    assert shown.exit_code == 0 and shown.output == f"bottown {metadata.version('bottown')}\n"
    store = Store.open("sqlite:///data/bottown.db")
    with store.engine.begin() as conn:
        conn.execute(text("update alembic_version set version_num = '9999'"))
    store.dispose()
    refused = runner.invoke(app, ["say", "Hobbs Cafe", "hello"])
    assert refused.exit_code == 2
    (line,) = refused.output.splitlines()
    assert line.startswith("error: the database") and "newer bottown (schema revision 9999)" in line


def test_config_masks_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOTTOWN_LLM_API_KEY", "sk-top-secret-999")
    monkeypatch.setenv("BOTTOWN_DATABASE_URL", "postgresql+psycopg://u:pw-777@127.0.0.1/db")
    result = runner.invoke(app, ["config"])
    assert result.exit_code == 0
    assert "sk-top-secret-999" not in result.output and "pw-777" not in result.output
    assert "***" in result.output


def test_llm_check(fake_llm: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOTTOWN_LLM_BASE_URL", fake_llm)
    monkeypatch.setenv("BOTTOWN_LLM_API_KEY", "sk-check-key-123")
    ok = runner.invoke(app, ["llm", "check"])
    assert ok.exit_code == 0 and "LLM OK" in ok.output
    queue_faults(fake_llm, "401")
    denied = runner.invoke(app, ["llm", "check"])
    assert denied.exit_code == 2  # a setting to fix, said in the last line
    assert (
        denied.output.splitlines()[-1]
        == "error: the server rejected the API key: check BOTTOWN_LLM_API_KEY"
    )
    assert "BOTTOWN_LLM_API_KEY" in denied.output and "sk-check-key-123" not in denied.output
    monkeypatch.setenv("BOTTOWN_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    down = runner.invoke(app, ["llm", "check"])
    assert down.exit_code == 2 and "cannot reach" in down.output


def test_llm_check_offline() -> None:
    result = runner.invoke(app, ["llm", "check"])
    assert result.exit_code == 0 and "offline brain" in result.output


def test_bench_retrieval_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    result = runner.invoke(
        app, ["bench", "retrieval", "--json", "--sizes", "300,1200", "--queries", "10"]
    )
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output.strip().splitlines()[-1])
    assert set(figures["sizes"]) == {"300", "1200"}
    for size in figures["sizes"].values():
        assert 0 < size["p50_ms"] <= size["p95_ms"]
    assert figures["inserts_per_s"] > 0 and figures["embedder"] == "hash"


def test_simulate_writes_a_replay_and_resumes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    args = ["simulate", "--town", str(MINITOWN), "--name", "mini", "--days", "0.1"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "founded mini at 2023-02-13 06:50" in first.output
    replay = Path("data/replays/mini.jsonl")
    lines = [json.loads(line) for line in replay.read_text().splitlines()]
    assert {"woke", "planned", "action"} <= {e["kind"] for e in lines}
    longer = runner.invoke(app, [*args[:-1], "0.2"])
    assert longer.exit_code == 0, longer.output
    assert (
        "resuming mini at 2023-02-13 09:14" in longer.output or "resuming mini at" in longer.output
    )
    assert len(replay.read_text().splitlines()) > len(lines)
    again = runner.invoke(app, [*args[:-1], "0.2"])  # already there: nothing to do
    assert again.exit_code == 0 and "0 ticks" in again.output


def test_town_commands_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    sim = runner.invoke(
        app, ["simulate", "--town", str(MINITOWN), "--name", "mini", "--days", "0.06"]
    )
    assert sim.exit_code == 0, sim.output
    said = runner.invoke(
        app,
        ["say", "Hobbs Cafe", "Hello Isabella, are you open?", "--as", "Alice", "--town", "mini"],
    )
    assert said.exit_code == 0, said.output
    assert "heard by: Isabella Rodriguez" in said.output
    asked = runner.invoke(app, ["interview", "Isabella", "Are you an AI?", "--town", "mini"])
    assert asked.exit_code == 0 and "AI" in asked.output
    voice = runner.invoke(app, ["whisper", "Klaus", "Talk to Maria", "--town", "mini"])
    assert voice.exit_code == 0 and "Klaus Mueller hears an inner voice" in voice.output
    stove = runner.invoke(
        app, ["set-state", "Hobbs Cafe: kitchen: stove", "burning", "--town", "mini"]
    )
    assert stove.exit_code == 0, stove.output
    bad = runner.invoke(app, ["set-state", "Hobbs Cafe: attic: box", "open", "--town", "mini"])
    assert bad.exit_code == 2 and "no object" in bad.output
    nowhere = runner.invoke(app, ["say", "the moon", "hi", "--town", "mini"])
    assert nowhere.exit_code == 2 and "no place" in nowhere.output
    missing = runner.invoke(app, ["interview", "Klaus", "hi", "--town", "atlantis"])
    assert missing.exit_code == 2 and "no town named 'atlantis'" in missing.output
    broken = runner.invoke(app, ["simulate", "--town", "/nowhere/town", "--days", "0.1"])
    assert broken.exit_code == 2


def test_a_shell_input_another_process_overtook_runs_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A running worker's tick that commits while ``bottown say`` is under way does not make the
    command fail (a visitor's words write nothing a tick reads: nothing to run again), and the
    words are heard once."""
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    sim = runner.invoke(
        app, ["simulate", "--town", str(MINITOWN), "--name", "mini", "--days", "0.06"]
    )
    assert sim.exit_code == 0, sim.output
    times = [1]
    monkeypatch.setattr(Engine, "unit", overtaking(times))
    words = "Is the cafe open on Sunday?"
    said = runner.invoke(app, ["say", "Hobbs Cafe", words, "--as", "Alice", "--town", "mini"])
    assert said.exit_code == 0 and times == [1], said.output
    assert "heard by: Isabella Rodriguez" in said.output
    on = runner.invoke(app, ["simulate", "--town", "mini", "--days", "0.07"])  # next ticks
    assert on.exit_code == 0, on.output
    found = runner.invoke(app, ["recall", "isabella", words, "--json", "--town", "mini"])
    assert found.exit_code == 0, found.output
    assert found.output.count(words) == 1


def test_chat_commands_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    sim = runner.invoke(
        app, ["simulate", "--town", str(MINITOWN), "--name", "mini", "--days", "0.06"]
    )
    assert sim.exit_code == 0, sim.output
    where = runner.invoke(app, ["cmd", "where", "--town", "mini"])
    assert where.exit_code == 0 and "Hobbs Cafe: " in where.output
    look = runner.invoke(app, ["cmd", "look", "--town", "mini", "--at", "Hobbs Cafe"])
    assert look.exit_code == 0 and "the stove is off" in look.output
    paused = runner.invoke(app, ["cmd", "pause", "--town", "mini"])
    assert paused.exit_code == 0 and "The clock stops" in paused.output
    member = runner.invoke(app, ["cmd", "resume", "--town", "mini", "--no-admin"])
    assert member.exit_code == 2 and "Only admins" in member.output
    # what the caller can fix: exit 2 and one line that says it
    unknown = runner.invoke(app, ["cmd", "frobnicate", "--town", "mini"])
    assert unknown.exit_code == 2 and unknown.output.count("\n") == 1
    assert unknown.output.startswith("error: There is no command 'frobnicate'")
    typo = runner.invoke(app, ["cmd", "look", "--town", "mini", "--at", "Hobs Cafe"])
    assert typo.exit_code == 2 and typo.output.count("\n") == 1
    assert typo.output.startswith("error: no place 'Hobs Cafe'") and "Usage" not in typo.output


def test_bench_town_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    args = ["bench", "town", "--residents", "3", "--hours", "2", "--latency-ms", "5", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output.strip().splitlines()[-1])
    assert figures["residents"] == 3 and figures["ticks"] == 12
    assert figures["calls_per_resident_day"] > 0 and figures["fallbacks"] == 0
    assert sum(task["calls_per_resident_day"] for task in figures["by_task"].values()) == (
        pytest.approx(figures["calls_per_resident_day"], abs=0.05)
    )
    assert figures["serial_s"] >= figures["critical_path_s"] > 0
    assert 0 < figures["loop_cpu_s"] <= figures["wall_s"] + 0.01  # one thread: at most its wall
    assert figures["activity"]["actions"] > 0
    assert figures["slots"] == 1 and figures["clock_behind_pct"] == 0  # a local server's one


def test_a_benchmarks_progress_bar_is_redrawn_twice_a_second(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each redraw runs on a thread of its own and stops the event loop being timed: in a
    terminal the benchmarks redraw their bar 2 times a second, other commands 10 times."""
    from rich.progress import Progress

    from bot.cli import common as cli_common

    made: list[Progress] = []

    def recorded(**options: float) -> Progress:
        made.append(bar := progress_bar(**options))
        return bar

    progress_bar = cli_common.progress_bar
    monkeypatch.setattr(cli_common, "progress_bar", recorded)
    with cli_common.progress_counter("ticks") as progress:
        progress(1, 2)
    assert [bar.live.refresh_per_second for bar in made] == [2.0]
    assert progress_bar().live.refresh_per_second == 10.0


def test_the_shell_reaches_the_demo_s_town_in_its_own_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    monkeypatch.setenv("BOTTOWN_DATA_DIR", "data/demo")  # where `make demo` keeps its town
    args = ["simulate", "--town", str(MINITOWN), "--name", "Smallville", "--days", "0.06"]
    assert runner.invoke(app, args).exit_code == 0
    monkeypatch.delenv("BOTTOWN_DATA_DIR")  # the shell, as a newcomer runs it
    said = runner.invoke(app, ["say", "Hobbs Cafe", "Hello Isabella!", "--as", "Alice"])
    assert said.exit_code == 0, said.output
    assert "heard by: Isabella Rodriguez" in said.output
    assert "the demo's" in said.output and "data/demo" in said.output

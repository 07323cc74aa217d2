"""``bottown town new`` and ``bottown town check``, as a user types them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from tests.bot.cli.test_cli import fake_stats

runner = CliRunner()


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")


def test_a_new_town_founds_and_lives_a_game_day_offline(tmp_path: Path) -> None:
    made = runner.invoke(app, ["town", "new", "harbour"])
    assert made.exit_code == 0, made.output
    assert "bottown town check ./harbour" in made.output
    for name in ("town.toml", "residents.toml", "scenario.toml"):
        text = (tmp_path / "harbour" / name).read_text("utf-8")
        assert text.count("#") >= 5  # every field carries a comment
    checked = runner.invoke(app, ["town", "check", "harbour"])
    assert checked.exit_code == 0, checked.output
    assert "3 places" in checked.output and "3 residents" in checked.output
    assert "Mara Quinn" in checked.output and "knows" in checked.output
    lived = runner.invoke(
        app, ["simulate", "--town", "./harbour", "--name", "harbour", "--days", "1"]
    )
    assert lived.exit_code == 0, lived.output
    assert "144 ticks" in lived.output
    assert "Mara Quinn" in lived.output


def test_new_refuses_a_folder_that_exists_and_copies_a_shipped_town(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    refused = runner.invoke(app, ["town", "new", "mine"])
    assert refused.exit_code == 2 and "exists already" in refused.output
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["notes.txt"]
    copied = runner.invoke(app, ["town", "new", "office", "--from", "interview-practice"])
    assert copied.exit_code == 0, copied.output
    assert (tmp_path / "office" / "interviews.toml").is_file()
    assert runner.invoke(app, ["town", "check", "office"]).exit_code == 0
    unknown = runner.invoke(app, ["town", "new", "other", "--from", "atlantis"])
    assert unknown.exit_code == 2 and "no town named 'atlantis'" in unknown.output
    assert not (tmp_path / "other").exists()


def test_check_lists_every_problem_as_file_field_reason(tmp_path: Path) -> None:
    assert runner.invoke(app, ["town", "new", "harbour"]).exit_code == 0
    residents = tmp_path / "harbour" / "residents.toml"
    text = residents.read_text("utf-8").replace("Rope Walk Cottages: Tom's cottage", "Nowhere: x")
    residents.write_text(text.replace("age = 61", 'age = "old"'), "utf-8")
    checked = runner.invoke(app, ["town", "check", "harbour"])
    assert checked.exit_code == 2
    assert "residents.toml: residents[1].home: 'Nowhere: x' is not a place" in checked.output
    assert "residents.toml: residents[2].age:" in checked.output
    assert "2 problems" in checked.output


def test_draft_through_the_fake_llm_server_writes_a_town_that_checks(
    fake_llm: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("BOTTOWN_LLM_BASE_URL", fake_llm)
    monkeypatch.setenv("BOTTOWN_LLM_MODEL", "bottown-fake")
    describe = "a space station where engineers and botanists share one greenhouse"
    drafted = runner.invoke(app, ["town", "draft", "station", "--describe", describe])
    assert drafted.exit_code == 0, drafted.output
    assert "LLM bottown-fake" in drafted.output and "0 repair rounds" in drafted.output
    assert "8 pieces" in drafted.output and "8 LLM calls" in drafted.output
    assert "no usable answer" not in drafted.output
    assert "filled from the offline scaffold" in drafted.output  # the fake writes thin routines
    by_task = fake_stats(fake_llm)["by_task"]
    assert by_task == {
        "draft_outline": 1,
        "draft_place": 3,
        "draft_resident": 3,
        "draft_scenario": 1,
    }
    assert runner.invoke(app, ["town", "check", "./station"]).exit_code == 0
    assert describe in (tmp_path / "station" / "town.toml").read_text("utf-8")


def test_draft_offline_says_an_llm_drafts_better_and_refuses_an_existing_folder(
    tmp_path: Path,
) -> None:
    drafted = runner.invoke(app, ["town", "draft", "tavern", "--describe", "a fantasy tavern"])
    assert drafted.exit_code == 0, drafted.output
    assert "an LLM drafts a far better town" in " ".join(drafted.output.split())
    again = runner.invoke(app, ["town", "draft", "tavern", "--describe", "a fantasy tavern"])
    assert again.exit_code == 2 and "exists already" in again.output


def test_a_draft_left_with_problems_is_written_nowhere(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from bot.cli import own_town
    from tests.fakes.brain import ScriptedBrain
    from tests.town.authoring.test_drafting import homeless

    brain = ScriptedBrain()
    for _ in range(3):
        brain.enqueue("draft_resident", homeless())
    monkeypatch.setattr(own_town, "_draft_brain", lambda *_: (brain, "LLM x"))
    lost = ["town", "draft", "lost", "--describe", "a lost town", "--residents", "1"]
    drafted = runner.invoke(app, lost)
    assert drafted.exit_code == 2
    assert "residents.toml: residents[0].home: 'Nowhere: attic' is not a place" in drafted.output
    assert "after 2 repair rounds: nothing was written" in drafted.output
    assert not (tmp_path / "lost").exists()


def test_update_and_reload_from_the_shell(tmp_path: Path) -> None:
    from tests.factories import MINITOWN
    from tests.town.authoring.edits import FINN, QUAY, folder_with, without

    ran = runner.invoke(
        app, ["simulate", "--town", str(MINITOWN), "--name", "mini", "--days", "0.02"]
    )
    assert ran.exit_code == 0, ran.output
    broken = folder_with(tmp_path, residents=FINN)  # his home is not in town.toml
    refused = runner.invoke(app, ["town", "update", str(broken), "--town", "mini"])
    assert refused.exit_code == 2
    assert 'residents.toml: residents[3].home: "Harbour Quay: Finn\'s cabin"' in refused.output
    assert "nothing was changed" in refused.output
    folder = folder_with(tmp_path, town=QUAY, residents=FINN)
    updated = runner.invoke(app, ["town", "update", str(folder), "--town", "mini"])
    assert updated.exit_code == 0, updated.output
    assert "Finn Reed moves in" in updated.output and "new place: Harbour Quay" in updated.output
    same = runner.invoke(app, ["cmd", "reload", "--town", "mini"])
    assert same.exit_code == 0 and "nothing to change" in same.output
    without(folder, "Klaus Mueller")  # edited again; a chat admin applies it
    reloaded = runner.invoke(app, ["cmd", "/town reload", "--town", "mini"])
    assert reloaded.exit_code == 0, reloaded.output
    assert "Klaus Mueller moves away (memories kept)" in reloaded.output
    outsider = runner.invoke(app, ["cmd", "reload", "--town", "mini", "--no-admin"])
    assert outsider.exit_code == 2 and "Only admins" in outsider.output
    lived = runner.invoke(app, ["simulate", "--town", "mini", "--name", "mini", "--days", "0.2"])
    assert lived.exit_code == 0, lived.output
    assert "Finn Reed" in lived.output and "Klaus Mueller" not in lived.output


@pytest.mark.parametrize(
    "fake_llm", [{"overrun_tokens": 3_000, "ignores_stream": True}], indirect=True
)
def test_a_draft_under_a_small_budget_stops_asking_once_it_is_spent(
    fake_llm: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Against a server that ignores ``max_tokens`` and ``stream`` (every reply 3,000 tokens
    long, sent whole), the draft counts what it was served, is served at most one call past
    the daily budget, and the offline brain drafts the rest."""
    monkeypatch.setenv("BOTTOWN_LLM_BASE_URL", fake_llm)
    monkeypatch.setenv("BOTTOWN_DAILY_TOKEN_BUDGET", "8000")
    describe = "a lighthouse island with a bakery"
    drafted = runner.invoke(app, ["town", "draft", "isle", "--describe", describe])
    assert drafted.exit_code == 0, drafted.output
    served = fake_stats(fake_llm)
    assert 0 < served["requests"] < 8  # the budget ran out before the eight pieces
    one_call = 3_000 + 1_000  # a reply at its length and a piece's prompt, at most
    assert served["tokens"] <= 8_000 + one_call
    said = " ".join(drafted.output.split())
    assert "the offline brain drafted those parts" in said
    counted = re.search(r"(\d+) LLM calls, ([\d,]+) prompt and ([\d,]+) completion tokens", said)
    assert counted is not None, said
    calls, prompt, completion = (int(n.replace(",", "")) for n in counted.groups())
    assert (calls, prompt + completion) == (served["requests"], served["tokens"])
    assert runner.invoke(app, ["town", "check", "./isle"]).exit_code == 0

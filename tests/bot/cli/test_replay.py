"""``bottown replay FILE``."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from bot.cli.main import app

runner = CliRunner()


def test_replay_is_a_command_and_a_bad_file_is_a_clear_error(tmp_path: Path) -> None:
    assert "replay" in runner.invoke(app, ["--help"]).output
    missing = runner.invoke(app, ["replay", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code == 2 and "cannot read the replay" in missing.output
    empty = tmp_path / "empty.jsonl"
    empty.write_text("hello\n", encoding="utf-8")
    refused = runner.invoke(app, ["replay", str(empty)])
    assert refused.exit_code == 2 and "holds no town events" in refused.output

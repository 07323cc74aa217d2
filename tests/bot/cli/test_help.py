"""Every ``--help`` of ``bottown`` reads cleanly at 80 columns: no ``<bool>`` beside a flag, no
word cut across two lines, no line wider than the terminal, defaults said as values."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from bot.cli.main import app

runner = CliRunner()
WORD = re.compile(r"[A-Za-z]{2,}")
FRAME = {"Usage", "Options", "Commands", "Arguments", "OPTIONS", "COMMAND", "ARGS", "default"}
FRAME |= set(
    WORD.findall("help: Show this message and exit. required str int float range list path")
)


def subcommands(command: Any) -> dict[str, Any]:
    return dict(getattr(command, "commands", {}))


def command_paths(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, command in subcommands(group).items():
        yield from command_paths(command, (*path, name))


def words_written(command: Any) -> set[str]:
    """Every word the help of ``command`` (and its subcommands) is made of, as written."""
    texts = [command.name or "", command.help or "", command.short_help or ""]
    for param in command.params:
        texts += [*param.opts, *param.secondary_opts, getattr(param, "help", "") or ""]
        texts += [param.name or "", str(param.default)]
    texts += [" ".join(words_written(c)) for c in subcommands(command).values()]
    return {w for text in texts for w in WORD.findall(text)}


ROOT = typer.main.get_command(app)
PATHS = list(command_paths(ROOT))


def test_every_command_is_covered() -> None:
    assert len(PATHS) > 30 and ("backup",) in PATHS and ("eval", "interview") in PATHS


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "bottown")
def test_help_reads_cleanly_at_80_columns(path: tuple[str, ...]) -> None:
    shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert shown.exit_code == 0, shown.output
    text = shown.output
    assert "<bool>" not in text and "settings." not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    command = ROOT
    for name in path:
        command = subcommands(command)[name]
    known = words_written(command) | words_written(ROOT) | FRAME
    cut = {w for w in WORD.findall(text) if w not in known}
    assert not cut, f"words not written anywhere (cut across lines?): {sorted(cut)}"

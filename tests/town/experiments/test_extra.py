"""The experiments' libraries are an optional extra: a missing one is a clear error."""

from __future__ import annotations

import subprocess
import sys

import pytest

from town.experiments.believability import Ranking, trueskill_table
from town.experiments.extra import MissingExtra, require


def test_a_missing_library_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trueskill", None)  # as if not installed
    with pytest.raises(MissingExtra, match=r"'trueskill'.*pip install 'bottown\[experiments\]'"):
        trueskill_table([Ranking("q", ("a", "b"), "r", "t")], ["a", "b"])


def test_the_command_line_starts_without_the_optional_extras() -> None:
    """The extras' libraries load only with a command that needs them (a fresh interpreter:
    what this one has imported says nothing)."""
    script = (
        "import sys; import bot.cli.main; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:])))"
    )
    extras = ["matplotlib", "sklearn", "trueskill", "psycopg"]
    found = subprocess.run(
        [sys.executable, "-c", script, *extras], capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "[]"


def test_a_command_can_ask_for_the_extra_up_front(monkeypatch: pytest.MonkeyPatch) -> None:
    require("trueskill", "matplotlib.figure")  # installed: nothing happens
    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(MissingExtra, match="'sklearn'"):
        require("trueskill", "sklearn")

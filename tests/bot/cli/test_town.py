"""The shell prints people's words as they wrote them: rich markup in them is text, not style."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from tests.factories import MINITOWN

runner = CliRunner()
MARKUP = "Hi [/] Isabella, [bold]open[/bold]? [red"


def test_say_and_audit_print_markup_in_a_visitors_words_as_text(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    monkeypatch.setenv("COLUMNS", "300")
    sim = runner.invoke(
        app, ["simulate", "--town", str(MINITOWN), "--name", "mini", "--days", "0.06"]
    )
    assert sim.exit_code == 0, sim.output
    said = runner.invoke(
        app, ["say", "Hobbs Cafe", MARKUP, "--as", "[/]Al[b]ice", "--town", "mini"]
    )
    assert said.exit_code == 0, said.output
    audit = runner.invoke(app, ["audit", "--town", "mini", "--kind", "say"])
    assert audit.exit_code == 0, audit.output
    assert MARKUP in audit.output and "[/]Al[b]ice" in audit.output
    nowhere = runner.invoke(app, ["say", "the [/] moon", "hi", "--town", "mini"])
    assert nowhere.exit_code == 2 and "[/] moon" in nowhere.output  # the red line, unbroken
    for empty in ("\u200b\u200b", "\u0001", "\u202e", "@everyone"):
        refused = runner.invoke(app, ["say", "Hobbs Cafe", empty, "--town", "mini"])
        assert refused.exit_code == 2 and "empty once cleaned" in refused.output, refused.output
    audit = runner.invoke(app, ["audit", "--town", "mini", "--kind", "say", "--format", "jsonl"])
    assert audit.output.count("\n") == 1  # only the first words were kept

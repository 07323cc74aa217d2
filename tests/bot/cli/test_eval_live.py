"""``bottown eval live``: the live figures as JSON and a table, grouped, with a plot; the up
and down reactions from the settings; bad options refused clearly."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli.main import app
from bot.runtime.run import TownRuntime
from bot.runtime.settings import SettingsError, load_settings
from tests.town.features.ratings.support import shown
from town.features.ratings.reactions import Reacted, react

runner = CliRunner()


async def test_eval_live_reports_counts_and_intervals(
    runtime: TownRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOTTOWN_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BOTTOWN_REACTIONS_UP", "🔥")
    engine, town = runtime.opened.engine, runtime.town_id
    ids = [shown(runtime.store, town, "Klaus Mueller", f"line {n}") for n in range(3)]
    for n, emoji in enumerate(("🔥", "🔥", "👍")):  # 👍 is not up here: counted apart
        await react(engine, Reacted("web", f"u{n}", "Someone", ids[n], emoji))

    result = runner.invoke(app, ["eval", "live", "--town", "mini", "--json", "--since", "7d"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    [klaus] = figures["groups"]
    assert figures["by"] == "resident" and klaus["name"] == "Klaus Mueller"
    assert (klaus["shown"], klaus["reacted"], klaus["rated_up"]) == (3, 3, 2)
    assert klaus["reactions"] == {"up": 2, "down": 0, "other": 1}
    assert klaus["share_up"] == 1.0 and round(klaus["low"], 3) == 0.342

    out = tmp_path / "plots"
    result = runner.invoke(
        app, ["eval", "live", "--town", "mini", "--by", "task", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "conversation" in result.output and "100% [34-100%]" in result.output
    assert "Bradley-Terry" not in result.output  # one group: nothing to compare
    assert (out / "live-by-task.png").stat().st_size > 1000

    maria = shown(runtime.store, town, "Maria Lopez", "Hm.")
    await react(engine, Reacted("web", "u9", "Someone", maria, "👎"))
    result = runner.invoke(app, ["eval", "live", "--town", "mini"])
    assert "Bradley-Terry: Klaus Mueller ahead of Maria Lopez with probability 0.8" in result.output

    for bad, says in (
        (["--by", "colour"], "one of resident"),
        (["--since", "soon"], "30m, 12h, 7d"),
        (["--town", "nowhere"], "no town named"),
    ):
        result = runner.invoke(app, ["eval", "live", "--town", "mini", *bad])
        assert result.exit_code == 2 and says in result.output, result.output


def test_a_reaction_both_up_and_down_is_a_settings_error() -> None:
    with pytest.raises(SettingsError, match="both up and down"):
        load_settings(reactions_up="👍 🔥", reactions_down="🔥")


async def test_a_plot_without_the_experiments_extra_says_what_to_install(
    runtime: TownRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOTTOWN_DATA_DIR", str(tmp_path / "data"))
    for module in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    result = runner.invoke(app, ["eval", "live", "--town", "mini", "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "pip install 'bottown[experiments]'" in result.output
    assert "Traceback" not in result.output

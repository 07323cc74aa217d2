"""Logs: a rotating file, JSON lines, secrets masked in every handler, and no member's words at
INFO."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import select

from bot.cli.common import settings_and_logging
from bot.runtime.logs import MASK, setup_logging
from bot.runtime.run import TownRuntime
from tests.adapters.web.support import HOBBS
from town.inputs.visit import Visit
from town.store.models import ChatLine

SECRET = "sk-very-secret-key-1234"


@pytest.fixture(autouse=True)
def _root_handlers_restored() -> Iterator[None]:
    """``setup_logging`` replaces the root logger's handlers (pytest's among them)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def test_the_log_file_rotates_at_its_size_and_keeps_its_backups(tmp_path: Path) -> None:
    log_file = tmp_path / "logs" / "bottown.log"
    setup_logging("INFO", [SECRET], file=log_file, file_bytes=2048, file_backups=2)
    for n in range(200):
        logging.getLogger("town.test").info("line %03d with the key %s", n, SECRET)
    kept = sorted(p.name for p in log_file.parent.iterdir())
    assert kept == ["bottown.log", "bottown.log.1", "bottown.log.2"]
    text = "".join(p.read_text() for p in log_file.parent.iterdir())
    assert SECRET not in text and MASK in text
    assert "line 199" in log_file.read_text() and "line 000" not in text  # the oldest went
    assert all(p.stat().st_size <= 2048 for p in log_file.parent.iterdir())
    first = log_file.read_text().splitlines()[0]
    assert " INFO town.test: line " in first


def test_json_lines_from_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log_file = tmp_path / "bottown.jsonl"
    monkeypatch.setenv("BOTTOWN_LOG_FILE", str(log_file))
    monkeypatch.setenv("BOTTOWN_LOG_FORMAT", "json")
    monkeypatch.setenv("BOTTOWN_LLM_API_KEY", SECRET)
    settings_and_logging()
    logging.getLogger("bot.test").warning("the key is %s", SECRET)
    try:
        raise ValueError("broken")
    except ValueError:
        logging.getLogger("bot.test").exception("it failed")
    lines = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert [(x["level"], x["logger"], x["message"]) for x in lines] == [
        ("WARNING", "bot.test", f"the key is {MASK}"),
        ("ERROR", "bot.test", "it failed"),
    ]
    assert lines[0]["time"].endswith("+00:00") and "ValueError: broken" in lines[1]["exception"]
    console = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [x["message"] for x in console] == [f"the key is {MASK}", "it failed"]


async def test_a_visitors_words_are_not_logged_at_info(
    runtime: TownRuntime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    words = "my phone number is 555-0199"
    await runtime.visitor_says(Visit.of(HOBBS, "Alice", words, "web", "v-alice"))
    await runtime.tick()
    with runtime.store.session() as s:
        kept = s.exec(select(ChatLine.text).where(ChatLine.kind == "visitor")).all()
    assert kept == [words], "the words were heard and kept, in the store"
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert not [m for m in loud if "555-0199" in m]

"""Settings: environment and TOML, clear errors for typos, secrets kept out of sight."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bot.runtime.logs import SecretFilter
from bot.runtime.settings import SettingsError, load_settings


def test_defaults_are_offline_and_embedded() -> None:
    settings = load_settings()
    assert not settings.uses_llm
    assert settings.resolved_database_url == "sqlite:///data/bottown.db"
    assert settings.chroma_url is None and settings.embedder == "minilm"


def test_environment_and_toml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    Path("bottown.toml").write_text(
        'llm_model = "llama3.1"\nllm_base_url = "http://127.0.0.1:11434/v1"\n'
    )
    monkeypatch.setenv("BOTTOWN_LLM_MODEL", "qwen2.5")
    settings = load_settings()
    assert settings.llm_model == "qwen2.5"  # the environment wins over the file
    assert settings.uses_llm and settings.llm_base_url == "http://127.0.0.1:11434/v1"


def test_typo_in_settings_file_names_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "custom.toml"
    path.write_text('llm_modle = "gpt-4o"\n')
    monkeypatch.setenv("BOTTOWN_CONFIG", str(path))
    with pytest.raises(SettingsError, match=r"llm_modle: unknown key"):
        load_settings()


def test_bad_value_and_missing_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOTTOWN_LLM_CONCURRENCY", "0")
    with pytest.raises(SettingsError, match="llm_concurrency"):
        load_settings()
    monkeypatch.delenv("BOTTOWN_LLM_CONCURRENCY")
    monkeypatch.setenv("BOTTOWN_CONFIG", "/nowhere/bottown.toml")
    with pytest.raises(SettingsError, match="not a file"):
        load_settings()


def test_brain_llm_needs_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOTTOWN_BRAIN", "llm")
    with pytest.raises(SettingsError, match="needs llm_base_url or llm_api_key"):
        load_settings()


def test_secret_never_in_repr_or_logs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("BOTTOWN_LLM_API_KEY", "sk-very-secret-123")
    settings = load_settings()
    assert "sk-very-secret-123" not in repr(settings)
    assert "sk-very-secret-123" not in str(settings.model_dump())
    logger = logging.getLogger("test.secret")
    secret = settings.llm_api_key.get_secret_value() if settings.llm_api_key else ""
    logger.addFilter(SecretFilter([secret]))
    with caplog.at_level(logging.INFO):
        logger.info("calling with key %s", secret)
    assert "sk-very-secret-123" not in caplog.text and "***" in caplog.text


def test_a_removed_key_is_named_and_said_to_be_removed() -> None:
    Path("bottown.toml").write_text('event_loop = "uvloop"\n')
    with pytest.raises(SettingsError, match=r"event_loop: unknown key: it was removed \("):
        load_settings()


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("notaurl", "not a database URL"),
        ("postgres://town:hunter2@db/town", "spelled postgresql://"),
        ("mysql://town:hunter2@db/town", "driver is not installed (MySQLdb)"),
        ("nosuchdb://x", "not a database URL"),
    ],
)
def test_a_malformed_database_url_is_one_clear_line_without_its_password(
    monkeypatch: pytest.MonkeyPatch, url: str, why: str
) -> None:
    from typer.testing import CliRunner

    from bot.cli.main import app

    monkeypatch.setenv("BOTTOWN_DATABASE_URL", url)
    with pytest.raises(SettingsError) as raised:
        load_settings()
    assert "database_url" in str(raised.value) and why in str(raised.value)
    result = CliRunner().invoke(app, ["migrate"])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "hunter2" not in result.output
    assert result.output.startswith("error: invalid settings")

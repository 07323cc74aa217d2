"""Logging set-up: rich output on stderr (or JSON lines), an optional rotating file, and no
secret ever written to a log line, whichever handler writes it.

``BOTTOWN_LOG_FORMAT=json`` makes every handler write one JSON object a line (time, level,
logger, message; the traceback as ``exception``), for a log shipper; ``BOTTOWN_LOG_FILE`` adds a
file that rotates at ``log_file_bytes`` and keeps ``log_file_backups`` old ones
(``logging.handlers.RotatingFileHandler``). Members' words are never logged at INFO or above.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from logging.handlers import RotatingFileHandler
from pathlib import Path

from rich.console import Console
from rich.logging import RichHandler

MASK = "***"
TEXT_LINE = "%(asctime)s %(levelname)s %(name)s: %(message)s"  # the file's, without JSON
NOISY = ("httpx", "httpx2", "openai", "chromadb", "alembic", "aiohttp.access")


class SecretFilter(logging.Filter):
    """Replaces every known secret in a record's final message with ***."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s and len(s) >= 4]

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.secrets:
            return True
        message = record.getMessage()
        cleaned = message
        for secret in self.secrets:
            cleaned = cleaned.replace(secret, MASK)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


class JsonLines(logging.Formatter):
    """One JSON object a line: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, and
    ``exception`` when the record carries one."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def setup_logging(
    level: str,
    secrets: Iterable[str] = (),
    *,
    form: str = "text",
    file: Path | None = None,
    file_bytes: int = 10_000_000,
    file_backups: int = 5,
) -> None:
    """The root logger's handlers, replacing any: the console, and ``file`` when given; each
    with the secret filter, in ``form`` ("text" or "json")."""
    console: logging.Handler
    if form == "json":
        console = logging.StreamHandler()  # stderr
    else:
        console = RichHandler(
            console=Console(stderr=True), show_path=False, rich_tracebacks=False, markup=False
        )
    handlers: list[logging.Handler] = [console]
    if file is not None:
        file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(
            RotatingFileHandler(
                file, maxBytes=file_bytes, backupCount=file_backups, encoding="utf-8"
            )
        )
    masking = SecretFilter(list(secrets))
    for handler in handlers:
        handler.addFilter(masking)
        if form == "json":
            handler.setFormatter(JsonLines())
        elif handler is not console:
            handler.setFormatter(logging.Formatter(TEXT_LINE))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
        old.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    for noisy in NOISY:
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))

"""Logging set-up: rich output on stderr, and no secret ever written to a log line."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from rich.console import Console
from rich.logging import RichHandler

MASK = "***"


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


def setup_logging(level: str, secrets: Iterable[str] = ()) -> None:
    handler = RichHandler(
        console=Console(stderr=True), show_path=False, rich_tracebacks=False, markup=False
    )
    handler.addFilter(SecretFilter(secrets))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    for noisy in ("httpx", "httpx2", "openai", "chromadb", "alembic", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, logging.getLevelName(level)))

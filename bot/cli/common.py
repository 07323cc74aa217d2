"""What every ``bottown`` command shares: the consoles, settings with logging, clear errors."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from bot.runtime.logs import setup_logging
from bot.runtime.settings import Settings, SettingsError, load_settings
from town.experiments.extra import MissingExtra
from town.llm.embedders import EmbeddingError
from town.memory.stream import InvalidMemory
from town.memory.vectors import VectorIndexError
from town.store.db import StoreError
from town.store.snapshot import SnapshotError
from town.tick.engine import TownChanged
from town.world.persona import PersonaError

out = Console()
err = Console(stderr=True)
T = TypeVar("T")


class StartFailed(RuntimeError):
    """A live town that could not start (a token refused, a port taken): said in one line."""


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (a library's may span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


CLEAR_ERRORS = (
    StartFailed,
    PersonaError,
    TownChanged,
    ValueError,
    SettingsError,
    StoreError,
    SnapshotError,
    VectorIndexError,
    EmbeddingError,
    LookupError,
    MissingExtra,
    InvalidMemory,
)


@contextmanager
def clear_errors() -> Iterator[None]:
    """Known failures end the command with one red line and exit code 2, not a traceback."""
    try:
        yield
    except CLEAR_ERRORS as exc:
        message = exc.args[0] if isinstance(exc, LookupError) and exc.args else str(exc)
        line = Text.assemble(("error:", "red"), " ", message)  # the message may quote input
        err.print(line, highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def settings_and_logging() -> Settings:
    settings = load_settings()
    setup_logging(
        settings.log_level,
        settings.secrets(),
        form=settings.log_format,
        file=settings.log_file,
        file_bytes=settings.log_file_bytes,
        file_backups=settings.log_file_backups,
    )
    return settings


def settings_with_brain(brain: str | None) -> Settings:
    """The settings, with ``--brain offline|llm`` applied and checked."""
    settings = settings_and_logging()
    if brain is not None:
        if brain not in ("offline", "llm"):
            raise SettingsError("--brain must be offline or llm")
        settings = settings.model_copy(update={"brain": brain})
        if brain == "llm" and not (settings.llm_base_url or settings.llm_api_key):
            raise SettingsError("--brain llm needs BOTTOWN_LLM_BASE_URL or BOTTOWN_LLM_API_KEY")
    return settings


def guarded(fn: Callable[[], T]) -> T:
    with clear_errors():
        return fn()


BENCH_REFRESH_PER_SECOND = 2.0  # a bar redrawn in a terminal holds the interpreter ~0.7 ms


def progress_bar(*, refresh_per_second: float = 10.0) -> Progress:
    """The progress bar of long commands, on stderr, gone when done. The benchmarks redraw it
    less often (``BENCH_REFRESH_PER_SECOND``): each redraw, on a thread of its own, stops the
    event loop they time."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        refresh_per_second=refresh_per_second,
    )


@contextmanager
def progress_counter(description: str) -> Iterator[Callable[[int, int], None]]:
    """A benchmark's ``progress_bar`` of one task, and the callback that moves it:
    ``(done, total)``."""
    with progress_bar(refresh_per_second=BENCH_REFRESH_PER_SECOND) as bar:
        task = bar.add_task(description, total=1)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield progress


def stamped_folder(settings: Settings, kind: str, name: str, given: Path | None) -> Path:
    """Where a run writes its results: ``given``, else a new folder named after the run and the
    time under the data folder (``data/eval/society-smallville-20261121-101500``)."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return given or settings.data_dir / kind / f"{name}-{stamp}"

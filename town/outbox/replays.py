"""Replay files: a run's town events, one JSON line each (``bottown simulate``, the demo), one
file per game day.

The current game day is written to ``<name>.jsonl``. When the first event of a later day comes,
that file becomes ``<name>.<YYYY-MM-DD>.jsonl`` (the day it holds), and the day files that fall
out of ``keep_days`` game days (the new one counted) are removed; 0 keeps every day. A reader
takes the parts in order (``replay_parts``), so a replay reads as one run.
"""

from __future__ import annotations

import contextlib
import glob
import json
from datetime import date, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TextIO


def replay_parts(path: Path) -> list[Path]:
    """The files of the replay ``path`` names, oldest first: its past days, then itself."""
    pattern = f"{glob.escape(path.stem)}.????-??-??{path.suffix}"
    days = sorted(p for p in path.parent.glob(pattern) if _day_of(p) is not None)
    return [*days, *([path] if path.is_file() else [])]


def _day_of(part: Path) -> date | None:
    with contextlib.suppress(ValueError):
        return date.fromisoformat(part.stem.rsplit(".", 1)[-1])
    return None


def _first_day(path: Path) -> date | None:
    """The game day of the current file's first event (None: no file, or none readable)."""
    try:
        with path.open(encoding="utf-8") as lines:
            first = lines.readline()
        return datetime.fromisoformat(json.loads(first)["at"]).date()
    except (OSError, ValueError, KeyError, TypeError):
        return None


class ReplayWriter:
    """Appends a run's events to ``path``, a file a game day, keeping ``keep_days`` days."""

    def __init__(self, path: Path, keep_days: int = 0) -> None:
        self.path, self.keep_days = path, keep_days
        self.day = _first_day(path)  # the game day the current file holds (a resumed run's)
        self._out: TextIO | None = None

    def write(self, line: str, at: datetime) -> None:
        """One event's line, at game time ``at``."""
        day = at.date()
        if self.day is not None and day > self.day:
            self._rotate(day)
        self.day = self.day or day
        if self._out is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._out = self.path.open("a", encoding="utf-8")
        self._out.write(line + "\n")

    def flush(self) -> None:
        if self._out is not None:
            self._out.flush()

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def __enter__(self) -> ReplayWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _rotate(self, new_day: date) -> None:
        """The current file becomes its day's; days past ``keep_days`` go."""
        self.close()
        assert self.day is not None
        done = self.path.with_name(f"{self.path.stem}.{self.day.isoformat()}{self.path.suffix}")
        if done.exists():  # a day written again (a town founded anew under the same name)
            with done.open("a", encoding="utf-8") as out:
                out.write(self.path.read_text(encoding="utf-8"))
            self.path.unlink()
        elif self.path.exists():
            self.path.rename(done)
        self.day = new_day
        if self.keep_days:
            oldest = new_day - timedelta(days=self.keep_days - 1)
            for part in replay_parts(self.path):
                part_day = _day_of(part)
                if part != self.path and part_day is not None and part_day < oldest:
                    part.unlink()

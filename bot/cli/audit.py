"""``bottown audit``: read, filter, export and prune the audit log (``town.outbox.audit``)."""

from __future__ import annotations

import csv
import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, TextIO

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text
from sqlmodel import select

from bot.cli.common import guarded, out, settings_and_logging
from bot.runtime.wiring import open_store
from town.outbox import audit as log_of
from town.outbox.audit import AuditFilter, AuditRow
from town.store.db import Store
from town.store.models import Town

FORMATS = ("table", "jsonl", "csv")
TABLE_ROWS = 50  # the table's default: the most recent rows
COLUMNS = (
    "id",
    "town",
    "direction",
    "kind",
    "platform",
    "channel",
    "who",
    "text",
    "game_time",
    "wall_time",
)
_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def parse_time(value: str, option: str) -> datetime:
    """An ISO 8601 wall time; without a zone it is UTC."""
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(
            f"{option}: {value!r} is not an ISO 8601 time such as 2026-11-20T08:00 "
            "(UTC unless it names a zone, e.g. +02:00)"
        ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def parse_span(value: str) -> timedelta:
    """``90s``, ``30m``, ``24h``, ``7d`` or ``2w``."""
    found = _SPAN.match(value)
    if not found or float(found.group(1)) <= 0:
        raise ValueError(f"--last: {value!r} is not a span such as 30m, 24h, 7d or 2w")
    return timedelta(seconds=float(found.group(1)) * _UNITS[found.group(2).lower()])


def build_filter(
    store: Store,
    *,
    town: str | None = None,
    since: str | None = None,
    last: str | None = None,
    until: str | None = None,
    direction: str | None = None,
    who: str | None = None,
    platform: str | None = None,
    channel: str | None = None,
    kind: str | None = None,
    text_contains: str | None = None,
    now: datetime | None = None,
) -> AuditFilter:
    """The command's options as an ``AuditFilter``, every mistake a clear ``ValueError``."""
    if since is not None and last is not None:
        raise ValueError("give --since or --last, not both")
    if direction is not None and direction.lower() not in log_of.DIRECTIONS:
        raise ValueError(f"--direction must be in or out, not {direction!r}")
    start = parse_time(since, "--since") if since is not None else None
    if last is not None:
        start = (now or datetime.now(UTC)) - parse_span(last)
    end = parse_time(until, "--until") if until is not None else None
    if start is not None and end is not None and start >= end:
        raise ValueError("the start of the time range (--since/--last) must come before --until")
    return AuditFilter(
        town_id=_town_id(store, town) if town is not None else None,
        since=start,
        until=end,
        direction=direction.lower() if direction is not None else None,
        who=who,
        platform=platform,
        channel=channel,
        kind=kind,
        text_contains=text_contains,
    )


def _town_id(store: Store, name: str) -> int:
    with store.session() as s:
        found = s.exec(select(Town).where(Town.name == name)).first()
        if found is None or found.id is None:
            known = ", ".join(s.exec(select(Town.name).order_by(Town.name)).all()) or "none yet"
            raise LookupError(f"no town named {name!r}; towns: {known}")
        return found.id


def _record(row: AuditRow) -> dict[str, str | int]:
    return {
        "id": row.id,
        "town": row.town,
        "direction": row.direction,
        "kind": row.kind,
        "platform": row.platform,
        "channel": row.channel,
        "who": row.who,
        "text": row.text,
        "game_time": row.game_time.isoformat(),
        "wall_time": row.wall_time.isoformat(),
    }


def write_jsonl(found: Iterator[AuditRow], sink: TextIO) -> int:
    """One JSON object a line, as the rows stream in. Returns how many."""
    n = 0
    for row in found:
        sink.write(json.dumps(_record(row), ensure_ascii=False) + "\n")
        n += 1
    return n


def _cell(value: str | int) -> str | int:
    """A spreadsheet would run a cell that begins with = + - @ as a formula: such a cell gets a
    leading apostrophe (visitors' words are untrusted). JSONL keeps the text verbatim."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def write_csv(found: Iterator[AuditRow], sink: TextIO) -> int:
    """A header and one row per entry, as the rows stream in. Returns how many."""
    writer = csv.writer(sink)
    writer.writerow(COLUMNS)
    n = 0
    for row in found:
        record = _record(row)
        writer.writerow([_cell(record[c]) for c in COLUMNS])
        n += 1
    return n


def write_table(found: list[AuditRow], sink: Console, caption: str, with_town: bool) -> int:
    table = Table(caption=caption, show_lines=False)
    for name in ("wall time (UTC)", "game time", *(["town"] if with_town else [])):
        table.add_column(name, no_wrap=True)
    for name in ("dir", "kind", "platform", "channel", "who"):
        table.add_column(name)
    table.add_column("text", overflow="fold")
    for row in found:
        table.add_row(
            f"{row.wall_time:%Y-%m-%d %H:%M:%S}",
            f"{row.game_time:%a %H:%M}",
            *([row.town] if with_town else []),
            row.direction,
            row.kind,
            row.platform,
            Text(row.channel),  # people's words and names: never read as rich markup
            Text(row.who),
            Text(row.text),
        )
    sink.print(table)
    return len(found)


@contextmanager
def _sink(output: Path | None) -> Iterator[TextIO]:
    """stdout, or ``output`` written whole or not at all (a ``.part`` file renamed at the end)."""
    if output is None:
        yield sys.stdout
        sys.stdout.flush()
        return
    if output.is_dir():
        raise ValueError(f"--output {output} is a folder; name a file")
    output.parent.mkdir(parents=True, exist_ok=True)
    part = output.with_name(output.name + ".part")
    try:
        with part.open("w", encoding="utf-8", newline="") as sink:
            yield sink
        part.replace(output)
    finally:
        part.unlink(missing_ok=True)


def export(
    store: Store,
    where: AuditFilter,
    fmt: str,
    output: Path | None = None,
    limit: int | None = None,
) -> int:
    """Write the matching rows in ``fmt`` to ``output`` (default stdout). Returns how many."""
    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if limit is not None and limit < 1:
        raise ValueError("--limit must be at least 1")
    if fmt == "table":
        newest = limit or TABLE_ROWS
        found = list(log_of.rows(store, where, newest=newest))
        total = log_of.count(store, where) if len(found) == newest else len(found)
        caption = f"{len(found):,} of {total:,} matching entries" + (
            " (the most recent; --limit N or --format jsonl for more)" if total > len(found) else ""
        )
        with _sink(output) as sink:
            console = out if output is None else Console(file=sink, width=160)
            return write_table(found, console, caption, where.town_id is None)
    with _sink(output) as sink:
        rows = log_of.rows(store, where, newest=limit)
        return (write_jsonl if fmt == "jsonl" else write_csv)(rows, sink)


def audit(
    town: Annotated[str | None, typer.Option(help="Only this town (default: every town).")] = None,
    since: Annotated[
        str | None, typer.Option(help="From this wall time, ISO 8601 (UTC unless zoned).")
    ] = None,
    last: Annotated[
        str | None, typer.Option(help="Only the last span of wall time: 30m, 24h, 7d, 2w.")
    ] = None,
    until: Annotated[str | None, typer.Option(help="Before this wall time, ISO 8601.")] = None,
    direction: Annotated[
        str | None, typer.Option(help="in (what people did) or out (what the town said).")
    ] = None,
    who: Annotated[
        str | None, typer.Option(help="Part of a name or platform id, any case.")
    ] = None,
    platform: Annotated[
        str | None, typer.Option(help="discord, slack, web or cli (the shell).")
    ] = None,
    channel: Annotated[str | None, typer.Option(help="A town location, e.g. 'Hobbs Cafe'.")] = None,
    kind: Annotated[
        str | None,
        typer.Option(help="say, command, whisper, set, interview, said, notice, answer."),
    ] = None,
    text_contains: Annotated[str | None, typer.Option(help="Part of the text, any case.")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, jsonl or csv.")] = "table",
    output: Annotated[
        Path | None, typer.Option(help="Write to this file instead of the screen.")
    ] = None,
    limit: Annotated[
        int | None, typer.Option(help=f"Only the N most recent (table: {TABLE_ROWS}).")
    ] = None,
    prune: Annotated[
        bool,
        typer.Option("--prune", help="Delete entries older than audit_retention_days, then stop."),
    ] = False,
) -> None:
    """Every input to the towns and every output, with game and wall time: filter, export, prune."""

    def run() -> None:
        settings = settings_and_logging()
        store = open_store(settings)
        try:
            if prune:
                town_id = _town_id(store, town) if town is not None else None
                days = settings.audit_retention_days
                if days == 0:
                    out.print("audit_retention_days is 0: the log is kept forever; nothing pruned")
                    return
                removed = log_of.prune(store, town_id, days)
                out.print(f"pruned {removed:,} audit entries older than {days} days")
                return
            where = build_filter(
                store,
                town=town,
                since=since,
                last=last,
                until=until,
                direction=direction,
                who=who,
                platform=platform,
                channel=channel,
                kind=kind,
                text_contains=text_contains,
            )
            written = export(store, where, fmt, output, limit)
            if output is not None:
                out.print(f"wrote {written:,} audit entries to {output}")
        finally:
            store.dispose()

    guarded(run)

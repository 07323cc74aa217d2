"""``bottown backup`` and ``bottown restore``: everything a deployment's towns need, copied while
they run, and brought back into a fresh data folder.

A backup folder holds the database (``bottown.db``, through SQLite's online backup API: the
database as of one commit; or ``bottown.pgdump`` from ``pg_dump``), the embedded Chroma folder
(``chroma/``), the replays, the persona folders the towns were founded or updated from when they
are folders of their own, and ``manifest.json`` (the release, the schema revision, counts, the
time it was made).

Chroma is copied before the database, so the copy of the index is never newer than the copy of
the database: every vector in it belongs to a memory the database copy holds (or held and forgot:
ids are never given twice), and a memory whose vector had not been written yet (the index is
written after each commit) is embedded again from its stored text when its resident's stream
loads (``ResidentVectors.read``); restore does it at once for every town (``repair_index``).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from datetime import datetime
from importlib import metadata
from pathlib import Path

from sqlmodel import func, select

from bot.runtime.consent import replay_paths
from bot.runtime.settings import Settings
from bot.runtime.wiring import Services
from town.store.db import Store, StoreError, known_revisions
from town.store.models import Memory, OutboxEvent, Resident, Town
from town.store.snapshot import copy_sqlite, dump_postgres, restore_postgres, sqlite_file

MANIFEST = "manifest.json"
SQLITE_COPY = "bottown.db"
POSTGRES_DUMP = "bottown.pgdump"
CHROMA = "chroma"
PERSONAS = "personas"
_LIVE_FILES = ("*-wal", "*-shm", "*-journal")  # SQLite's side files: the backup API reads them


@dataclass
class Manifest:
    version: str
    schema: list[str]
    created: str
    database: str  # sqlite or postgresql
    counts: dict[str, int]
    chroma: str  # "copied", or where a Chroma server keeps its own data
    personas: dict[str, str] = field(default_factory=dict)  # folder here -> the town's path
    replays: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        file = folder / MANIFEST
        if not file.is_file():
            raise ValueError(f"{folder} is not a bottown backup (no {MANIFEST} in it)")
        return cls(**json.loads(file.read_text()))


@dataclass
class Restored:
    manifest: Manifest
    reembedded: int  # vectors the copy of the index lacked, embedded again
    personas_kept: list[str]  # persona folders already in place, left as they are


def back_up(settings: Settings, target: Path, now: datetime) -> Manifest:
    """Copy everything the towns need into ``target`` (a new or empty folder) while they run."""
    if target.exists() and any(target.iterdir()):
        raise ValueError(f"{target} is not empty: back up into a new folder")
    target.mkdir(parents=True, exist_ok=True)
    chroma = _copy_chroma(settings, target)  # first: never newer than the database's copy
    url = settings.resolved_database_url
    live = sqlite_file(url)
    if live is not None:
        copy_sqlite(live, target / SQLITE_COPY)
        copied = Store(f"sqlite:///{target / SQLITE_COPY}")
    else:
        dump_postgres(url, target / POSTGRES_DUMP)
        copied = Store(url)  # counts as of just after the dump
    try:
        schema, counts = sorted(copied.revision()), _counts(copied)
        folders = _town_folders(copied)
    finally:
        copied.dispose()
    manifest = Manifest(
        version=metadata.version("bottown"),
        schema=schema,
        created=now.isoformat(timespec="seconds"),
        database="sqlite" if live is not None else "postgresql",
        counts=counts,
        chroma=chroma,
        personas=_copy_personas(folders, target),
        replays=_copy_replays(settings.data_dir, target),
    )
    (target / MANIFEST).write_text(json.dumps(asdict(manifest), indent=2) + "\n")
    return manifest


def restore(settings: Settings, source: Path) -> Restored:
    """Bring the backup in ``source`` back into the configured, fresh, data folder (and
    database); a backup of a schema this code does not know is refused."""
    manifest = Manifest.read(source)
    newer = set(manifest.schema) - known_revisions()
    if newer:
        raise StoreError(
            f"the backup in {source} was made by a newer bottown ({manifest.version}, schema "
            f"revision {', '.join(sorted(newer))}): upgrade bottown to restore it"
        )
    data = settings.data_dir
    url = settings.resolved_database_url
    live = sqlite_file(url)
    for taken in (live, data / CHROMA, data / "replays"):
        if taken is not None and taken.exists():
            raise ValueError(
                f"{taken} exists: restore into a fresh data folder (BOTTOWN_DATA_DIR=new-folder)"
            )
    if (source / SQLITE_COPY).is_file() and live is not None:
        copy_sqlite(source / SQLITE_COPY, live)
    elif (source / POSTGRES_DUMP).is_file() and live is None:
        restore_postgres(url, source / POSTGRES_DUMP)
    else:
        raise ValueError(
            f"the backup holds a {manifest.database} database and BOTTOWN_DATABASE_URL names "
            "another kind: set it to match the backup"
        )
    if (source / CHROMA).is_dir() and settings.chroma_url is None:
        shutil.copytree(source / CHROMA, data / CHROMA)
    for name in manifest.replays:
        _copy_path(source / name, data / name)
    kept = _put_back_personas(source, manifest.personas)
    services = Services.open(settings)  # an older backup is upgraded here, after its own copy
    try:
        with services.store.session() as s:
            towns = [t for t in s.exec(select(Town.id)).all() if t is not None]
        reembedded = sum(services.repair_index(t) for t in towns)
    finally:
        services.close()
    return Restored(manifest, reembedded, kept)


def _copy_chroma(settings: Settings, target: Path) -> str:
    if settings.chroma_url:
        return f"a Chroma server at {settings.chroma_url}: back up its own data folder"
    folder = settings.data_dir / CHROMA
    if folder.is_dir():
        shutil.copytree(
            folder,
            target / CHROMA,
            ignore=shutil.ignore_patterns(*_LIVE_FILES),
            copy_function=_copy_file,
        )
    return "copied"


def _copy_file(source: str, target: str) -> None:
    """A file of Chroma's folder: its SQLite database through the backup API, the rest as is."""
    if source.endswith(".sqlite3"):
        copy_sqlite(Path(source), Path(target))
    else:
        shutil.copy2(source, target)


def _counts(store: Store) -> dict[str, int]:
    with store.session() as s:
        return {
            name: s.exec(select(func.count()).select_from(table)).one()
            for name, table in (
                ("towns", Town),
                ("residents", Resident),
                ("memories", Memory),
                ("outbox", OutboxEvent),
            )
        }


def _town_folders(store: Store) -> dict[int, str]:
    """The towns' persona folders of their own (a path; a bare name is one bottown ships)."""
    with store.session() as s:
        rows = s.exec(select(Town.id, Town.scenario)).all()
    return {i: f for i, f in rows if i is not None and ("/" in f or "\\" in f or f[:1] == ".")}


def _copy_personas(folders: dict[int, str], target: Path) -> dict[str, str]:
    copied = {}
    for town_id, folder in sorted(folders.items()):
        if Path(folder).is_dir():
            name = f"{PERSONAS}/{town_id}-{Path(folder).name}"
            shutil.copytree(folder, target / name)
            copied[name] = folder
    return copied


def _put_back_personas(source: Path, personas: dict[str, str]) -> list[str]:
    kept = []
    for name, folder in personas.items():
        if Path(folder).exists():
            kept.append(folder)
        else:
            shutil.copytree(source / name, folder)
    return kept


def _copy_replays(data_dir: Path, target: Path) -> list[str]:
    copied = []
    for path in replay_paths(data_dir):
        files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        for file in files:
            if file.is_file():
                name = file.relative_to(data_dir).as_posix()
                _copy_whole_lines(file, target / name)
                copied.append(name)
    return copied


def _copy_whole_lines(source: Path, target: Path) -> None:
    """A replay as far as its last whole line (the town may be appending one)."""
    data = source.read_bytes()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data[: data.rfind(b"\n") + 1])


def _copy_path(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)

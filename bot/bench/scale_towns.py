"""The towns of ``bottown bench scale``: founded once (rating and embedding the seed memories),
cached under ``<data_dir>/bench-cache``, and copied for each run, so reruns start at once."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import numpy as np
from sqlmodel import select

from bot.runtime.settings import Settings
from bot.runtime.wiring import Services
from town.llm.embedders import Embedder
from town.llm.port import OfflineBrain
from town.memory.vectors import ChromaIndex
from town.store.db import Store
from town.store.models import Resident
from town.tick.seed import found_town
from town.world.load import load_town
from town.world.persona import TownSpec

CACHE_VERSION = 3


def town_spec(residents: int) -> TownSpec:
    spec = load_town("smallville")
    if not 1 <= residents <= len(spec.residents):
        raise ValueError(f"--residents-per-town must be 1 to {len(spec.residents)} (Smallville)")
    return spec.model_copy(update={"residents": spec.residents[:residents]})


def prepared(settings: Settings, towns: int, residents: int, embedder: Embedder) -> Path:
    """A folder with ``towns`` founded copies of the town (``town-<i>.db``) and their vectors
    (``chroma/``, namespace ``t<i>``, one collection per town); built once, then found in the
    cache."""
    key = f"scale-v{CACHE_VERSION}-{embedder.name}-{embedder.dim}-t{towns}-r{residents}"
    folder = settings.data_dir.resolve() / "bench-cache" / key
    if (folder / "ready").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    building = folder.with_name(folder.name + ".building")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    template = building / "template.db"
    spec = town_spec(residents)
    store = Store.open(f"sqlite:///{template}")
    index = ChromaIndex(path=building / "chroma", embedder_name=embedder.name, dim=embedder.dim)
    services = Services(
        settings.model_copy(update={"chroma_namespace": "tpl"}), store, embedder, index
    )
    start = spec.scenario.start.replace(hour=6, minute=58)

    async def found() -> tuple[int, list[int]]:
        town = await found_town(
            store,
            spec,
            "bench",
            OfflineBrain(),
            services.stream,
            persona="smallville",
            start=start,
            minutes_per_tick=1,
        )
        town_id = town.id
        assert town_id is not None
        with store.session() as s:
            return town_id, [r.id for r in s.exec(select(Resident)).all() if r.id is not None]

    town_id, resident_ids = asyncio.run(found())
    services.close()  # the vectors are written before the copies are taken
    seeds = {rid: index.fetch(f"tpl-t{town_id}", rid) for rid in resident_ids}
    arrays: dict[str, np.ndarray] = {"town": np.array([town_id])}
    for rid, (ids, vectors) in seeds.items():
        arrays[f"ids{rid}"], arrays[f"vec{rid}"] = ids, vectors
    np.savez(building / "vectors.npz", allow_pickle=False, **arrays)
    for i in range(towns):
        shutil.copyfile(template, building / f"town-{i}.db")
        _seed(index, f"t{i}-t{town_id}", seeds)
    template.unlink()
    ChromaIndex.release_all()
    (building / "ready").write_text("ok\n")
    building.rename(folder)
    return folder


def copy_run(cache: Path, run: Path, *, with_chroma: bool) -> None:
    """The cached towns, copied for one run (their vectors too, unless a server holds them)."""
    ignore = None if with_chroma else shutil.ignore_patterns("chroma")
    shutil.copytree(cache, run, dirs_exist_ok=True, ignore=ignore)


Seeds = dict[int, tuple[np.ndarray, np.ndarray]]  # resident id -> memory ids, vectors


def _seed(index: ChromaIndex, collection: str, seeds: Seeds) -> None:
    """A town's seed vectors (each resident's ids and vectors) into its collection."""
    ids = np.concatenate([ids for ids, _ in seeds.values()])
    residents = [rid for rid, (ids, _) in seeds.items() for _ in range(len(ids))]
    index.upsert(
        collection, ids.tolist(), residents, np.concatenate([v for _, v in seeds.values()])
    )


def _seeds(cache: Path) -> tuple[int, Seeds]:
    with np.load(cache / "vectors.npz") as data:
        rids = sorted(int(k[3:]) for k in data.files if k.startswith("ids"))
        town = int(data["town"][0])
        return town, {rid: (data[f"ids{rid}"], data[f"vec{rid}"]) for rid in rids}


def seed_server(index: ChromaIndex, cache: Path, prefix: str, towns: int) -> None:
    """Every town's seed vectors into a Chroma server, under this run's namespaces."""
    town, seeds = _seeds(cache)
    for i in range(towns):
        _seed(index, f"{prefix}t{i}-t{town}", seeds)


def drop_server(index: ChromaIndex, cache: Path, prefix: str, towns: int) -> None:
    town, _ = _seeds(cache)
    for i in range(towns):
        index.drop(f"{prefix}t{i}-t{town}")

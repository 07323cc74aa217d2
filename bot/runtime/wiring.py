"""Builds the town's ports from the settings: store, embedder, vector index and brain."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from sqlmodel import func, select

from bot.runtime.settings import Settings
from town.features.ratings.split import SplitBrain
from town.inputs.unit import resident_named
from town.llm.chain import Handles, Servers, compose
from town.llm.client import open_client, open_sync_client
from town.llm.embedders import CachedEmbedder, Embedder, HashEmbedder, OpenAIEmbedder
from town.llm.gateway import LLMGateway
from town.llm.pacing import default_slots, turn_of
from town.llm.port import Brain, OfflineBrain
from town.llm.task import I, R, Task
from town.llm.usage import Holds
from town.memory.embedding_queue import embedding_executor, flush_queues
from town.memory.minilm import MiniLMEmbedder
from town.memory.retrieval import RetrievalWeights
from town.memory.stream import MemoryStream
from town.memory.vectors import ChromaIndex
from town.store.db import Store
from town.store.models import Memory, Resident, Town
from town.store.usage import DailyTokenBudget, StoredUsage
from town.text import echoed

log = logging.getLogger(__name__)


def open_store(settings: Settings, *, back_up: bool = True) -> Store:
    """The configured database, migrated: an older one upgraded after a copy of it is made in
    the data folder's ``backups`` (unless ``back_up`` is off), a newer one refused."""
    return Store.open(settings.resolved_database_url, backups=settings.backups_dir, back_up=back_up)


def build_embedder(settings: Settings) -> Embedder:
    inner: Embedder
    if settings.embedder == "minilm":
        inner = MiniLMEmbedder(precision=settings.embedding_precision)
    elif settings.embedder == "hash":
        inner = HashEmbedder(dim=settings.embedding_dim)
    else:
        client = open_sync_client(settings.llm_base_url, _api_key(settings), settings.llm_timeout_s)
        inner = OpenAIEmbedder(client, settings.embedding_model, settings.embedding_dim)
    return CachedEmbedder(inner)


def _api_key(settings: Settings) -> str:
    # Local servers (Ollama, vLLM, LM Studio) accept any key; the client insists on one.
    return settings.llm_api_key.get_secret_value() if settings.llm_api_key else "not-needed"


def build_brain(
    settings: Settings,
    store: Store,
    town_id: int | None,
    embedder: Embedder | None = None,
    servers: Servers | None = None,
) -> tuple[Brain, Handles, StoredUsage]:
    """The town's brain, composed once here (:func:`town.llm.chain.compose`): the configured
    LLM behind the fallback and the report, or the offline brain when no LLM is configured
    (hearing visitors' lines with ``embedder``, the town's, when given). Its handles
    (:class:`Handles`) and its usage tally are returned beside it: flush the tally after each
    unit of work that used the brain. ``town_id`` None: a town being founded (the tally is told
    its id once it has one, :meth:`StoredUsage.founded`). ``servers`` holds one pacer per server,
    shared by every town and model that calls it (a fresh one by default); the town's calls take
    their turns there beside other towns' (:class:`InTownsTurn`)."""
    usage = StoredUsage(store, town_id)
    offline = OfflineBrain(embedder)
    if not settings.uses_llm:
        return (*compose((), offline=offline), usage)
    budget = DailyTokenBudget(
        usage, settings.daily_token_budget, limit_calls=settings.daily_call_budget
    )
    holds = Holds(budget)
    servers = servers if servers is not None else Servers()
    first = _gateway(settings, settings.llm_base_url, settings.llm_model, holds, servers)
    if not settings.llm_model_b:
        brain, handles = compose([first], offline=offline, usage=usage, budget=budget)
        return InTownsTurn(brain), handles, usage
    base_url_b = settings.llm_base_url_b or settings.llm_base_url
    second = _gateway(settings, base_url_b, settings.llm_model_b, holds, servers)
    split = SplitBrain((first.model, first), (second.model, second), by=settings.ab_split)
    brain, handles = compose(
        [first, second], offline=offline, usage=usage, budget=budget, split=split
    )
    return InTownsTurn(brain), handles, usage


@dataclass(eq=False)  # each town's brain its own key in the pacer's turns
class InTownsTurn:
    """A town's brain whose calls wait at a shared server in the town's turn
    (:func:`town.llm.pacing.turn_of`): a busy town cannot crowd out a quiet one's calls."""

    inner: Brain

    @property
    def name(self) -> str:
        return self.inner.name

    async def run(self, task: Task[I, R], inputs: I, *, resident: str | None = None) -> R:
        with turn_of(self):
            return await self.inner.run(task, inputs, resident=resident)


def _gateway(
    settings: Settings, base_url: str | None, model: str, holds: Holds, servers: Servers
) -> LLMGateway:
    client = open_client(
        base_url,
        _api_key(settings),
        settings.llm_timeout_s,
        max_retries=settings.llm_max_attempts - 1,
    )
    slots = settings.llm_slots or default_slots(base_url, settings.llm_concurrency)
    return LLMGateway(
        client,
        model=model,
        pacer=servers.pacer(base_url, slots, settings.llm_timeout_s, settings.llm_concurrency),
        holds=holds,
        priority=settings.llm_priority,
    )


@dataclass
class Services:
    """The ports of one deployment, built once and shared by every town it runs."""

    settings: Settings
    store: Store
    embedder: Embedder
    index: ChromaIndex
    # one worker thread computes embeddings, so the event loop is not blocked by them
    executor: ThreadPoolExecutor = field(default_factory=embedding_executor)
    servers: Servers = field(default_factory=Servers)  # one pacer per LLM server
    _streams: dict[int, MemoryStream] = field(default_factory=dict)

    @classmethod
    def open(cls, settings: Settings) -> Services:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        store = open_store(settings)
        embedder = build_embedder(settings)
        index = ChromaIndex(
            path=settings.data_dir / "chroma",
            url=settings.chroma_url,
            embedder_name=embedder.name,
            dim=embedder.dim,
        )
        return cls(settings, store, embedder, index)

    def close(self) -> None:
        """Finish the index writes and release the database."""
        flush_queues(self.executor)
        self.executor.shutdown(wait=True)
        self.store.dispose()

    def stream(self, resident_id: int) -> MemoryStream:
        found = self._streams.get(resident_id)
        if found is None:
            found = self._streams[resident_id] = self.new_stream(resident_id)
        return found

    def new_stream(self, resident_id: int) -> MemoryStream:
        """A memory stream of the resident's own, not the one this deployment's towns use."""
        s = self.settings
        return MemoryStream(
            resident_id=resident_id,
            embedder=self.embedder,
            index=self.index,
            namespace=s.chroma_namespace,
            weights=RetrievalWeights(
                s.recency_weight, s.importance_weight, s.relevance_weight, s.recency_decay
            ),
            executor=self.executor,
        )

    def repair_index(self, town_id: int) -> int:
        """Embed and index again the town's memories the vector index lacks, as of now; how
        many. A worker killed while holding the town lost the index writes it had not made
        yet; its residents' streams would mend that only as each one loads.
        Runs on the calling thread (the embedding executor, say) beside the running town."""
        with self.store.session() as session:
            upto = session.exec(select(func.max(Memory.id))).one() or 0
            residents = session.exec(select(Resident.id).where(Resident.town_id == town_id)).all()
            return sum(self.new_stream(r).repair(session, upto) for r in residents if r)

    def town(self, name: str) -> Town:
        """The stored town called ``name`` (in any case)."""
        with self.store.session() as s:
            town = s.exec(select(Town).where(func.lower(Town.name) == name.lower())).first()
            if town is None:
                raise LookupError(
                    f"no town named {name!r}: run `bottown simulate --town {name}` first"
                )
            return town

    def resident(self, town: Town, name: str) -> Resident:
        """The town's resident ``name`` stands for (a full name in any case, or a first name:
        ``resident_named``)."""
        with self.store.session() as s:
            rows = {r.name: r for r in s.exec(select(Resident).where(Resident.town_id == town.id))}
            full = resident_named(rows, name)
            if full is None:
                hint = f"; residents: {', '.join(sorted(rows))}" if rows else ""
                raise LookupError(f"no resident named {echoed(name)!r} in {town.name}{hint}")
            return rows[full]

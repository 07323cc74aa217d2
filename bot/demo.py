"""``bottown demo``: one resident seeded from a paragraph, a morning of observations, a reflection
that cites its memories, retrieval with the paper's score, and an interview.

Each run starts the ``demo`` town afresh. With no LLM configured it runs on the offline brain and
says so; with one (``BOTTOWN_LLM_*``) every step goes through the LLM gateway.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rich.console import Console
from rich.table import Table
from sqlmodel import col, delete, select

from bot.settings import Settings
from bot.wiring import Services, build_brain
from town.llm.port import Brain
from town.llm.schemas import InterviewInput, RateImportanceInput
from town.llm.tasks import INTERVIEW, RATE_IMPORTANCE
from town.memory import MemoryStream, NewMemory
from town.reflection import reflect
from town.store.models import Memory, Resident, Town

TOWN = "demo"
RESIDENT = "Isabella Rodriguez"
START = datetime(2023, 2, 13, 7, 0, tzinfo=UTC)
SEED = (
    "Isabella Rodriguez runs Hobbs Cafe and opens it at eight every morning; "
    "she loves making people feel welcome; "
    "she is planning a Valentine's Day party at Hobbs Cafe on February 14 from 5 to 7 pm; "
    "Maria Lopez is a regular at the cafe and a close friend; "
    "Klaus Mueller studies sociology at Oak Hill College and often works at the cafe; "
    "Isabella worries that the cafe's old stove needs repairs"
)
MORNING = [
    (30, "the kettle in the cafe kitchen is whistling"),
    (60, "Maria Lopez came in for a latte and said she would bring decorations for the party"),
    (75, "Klaus Mueller asked whether the Valentine's party is open to everyone"),
    (90, "the stove in the cafe kitchen is burning and smoke fills the room"),
    (100, "Isabella turned off the stove and opened the windows"),
    (120, "Sam Moore mentioned that he is running for mayor"),
    (150, "a visitor named Alice, a reporter, asked about the history of Hobbs Cafe"),
]
QUERIES = ["the Valentine's Day party", "the stove", "who is running for mayor"]
QUESTIONS = [
    "What are you planning for Valentine's Day?",
    "Are you an AI?",
]


async def run_demo(settings: Settings, out: Console) -> None:
    services = Services.open(settings)
    town, resident = _fresh_town(services)
    assert town.id is not None and resident.id is not None
    brain, usage = build_brain(settings, services.store, town.id)
    stream = services.stream(resident.id)
    label = (
        f"LLM {settings.llm_model} via the gateway"
        if settings.uses_llm
        else "OFFLINE BRAIN (deterministic, no LLM configured)"
    )
    out.rule(f"bottown demo — brain: {label}")

    phrases = [p.strip() for p in SEED.split(";") if p.strip()]
    await _remember(services, brain, stream, RESIDENT, "seed", phrases, START)
    out.print(f"[bold]{RESIDENT}[/bold] is seeded with {len(phrases)} memories from one paragraph.")

    for minutes, text in MORNING:
        at = START + timedelta(minutes=minutes)
        (memory,) = await _remember(services, brain, stream, RESIDENT, "observation", [text], at)
        out.print(f"  {at:%H:%M}  observes: {text}  [dim](importance {memory.importance})[/dim]")

    now = START + timedelta(hours=3)
    with services.store.session() as s:
        reflections = await reflect(brain, stream, s, RESIDENT, now)
    out.print(f"\n[bold]Reflection[/bold] at {now:%H:%M}: {len(reflections)} insights")
    for memory in reflections:
        out.print(f"  • {memory.text}  [dim](cites {memory.cites})[/dim]")

    for query in QUERIES:
        with services.store.session() as s:
            found = stream.retrieve(s, query, now, k=4)
        table = Table(
            "score",
            "recency",
            "importance",
            "relevance",
            "kind",
            "memory",
            title=f"recall: {query!r}",
        )
        for r in found:
            table.add_row(
                f"{r.score:.2f}",
                f"{r.recency:.2f}",
                f"{r.importance:.2f}",
                f"{r.relevance:.2f}",
                r.memory.kind,
                r.memory.text,
            )
        out.print(table)

    for question in QUESTIONS:
        with services.store.session() as s:
            memories = [r.memory.text for r in stream.retrieve(s, question, now, k=8)]
        reply = await brain.run(
            INTERVIEW,
            InterviewInput(
                resident=RESIDENT,
                summary=phrases[0],
                memories=memories,
                question=question,
                asker="a visitor",
            ),
            resident=RESIDENT,
        )
        out.print(f"\n[bold]Q:[/bold] {question}\n[bold]{RESIDENT}:[/bold] {reply.answer}")
    usage.flush()
    out.rule(f'done — data in {settings.data_dir}/ (try: bottown recall "{RESIDENT}" "party")')


async def _remember(
    services: Services,
    brain: Brain,
    stream: MemoryStream,
    resident: str,
    kind: str,
    texts: list[str],
    at: datetime,
) -> list[Memory]:
    rated = await brain.run(
        RATE_IMPORTANCE,
        RateImportanceInput(resident=resident, observations=texts),
        resident=resident,
    )
    scores = list(rated.scores) + [5] * (len(texts) - len(rated.scores))
    with services.store.session() as s:
        return stream.add(
            s, [NewMemory(kind, t, n) for t, n in zip(texts, scores, strict=False)], at
        )


def _fresh_town(services: Services) -> tuple[Town, Resident]:
    """The demo town with one resident and no memories, whatever an earlier run left."""
    with services.store.session() as s:
        old = s.exec(select(Town).where(Town.name == TOWN)).first()
        if old is not None:
            ids = s.exec(select(Resident.id).where(Resident.town_id == old.id)).all()
            s.execute(delete(Memory).where(col(Memory.resident_id).in_(ids)))
            for rid in ids:
                assert rid is not None
                services.stream(rid).forget_cache()
                services.index.drop(services.stream(rid).collection)
            old.clock = START
            s.add(old)
    town = services.town(TOWN, create=True, clock=START)
    return town, services.resident(town, RESIDENT, create=True)

"""For each platform's consent tests: a member the town knows well (heard, answered, in a replay)
and a search of every place the town could keep them: every table, the vector index, replays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlmodel import select

from tests.town.features.consent.support import traces, vector_ids_without_memories
from town.inputs.query import interview
from town.store.models import Memory, OutboxEvent

PHRASE = "the purple walrus dances at midnight"


def write_replay(runtime: Any) -> Path:
    """The town's events so far as a replay file where ``bottown simulate`` keeps them."""
    folder = Path(runtime.settings.data_dir) / "replays"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mini.jsonl"
    with runtime.store.session() as s, path.open("w", encoding="utf-8") as out:
        for event in s.exec(select(OutboxEvent)):
            line = {"at": event.game_time.isoformat(), "kind": event.kind, **event.payload}
            out.write(json.dumps({"channel": event.channel, **line}, ensure_ascii=False) + "\n")
    return path


def held_anywhere(runtime: Any, needles: list[str]) -> list[str]:
    """Where the town still holds any of ``needles``: rows, orphaned vectors, replay lines."""
    found = traces(runtime.store, needles)
    engine = runtime.opened.engine
    found += [f"vector {i}" for i in vector_ids_without_memories(engine, runtime.store)]
    for path in Path(runtime.settings.data_dir).glob("**/*.jsonl"):
        text = path.read_text(encoding="utf-8").casefold()
        found += [f"{path.name}: {n}" for n in needles if n.casefold() in text]
    return found


def remembered(runtime: Any, needle: str) -> bool:
    with runtime.store.session() as s:
        return any(needle.casefold() in m.text.casefold() for m in s.exec(select(Memory)))


async def knows(runtime: Any, resident: str, name: str) -> bool:
    answer = await interview(runtime.opened.engine, resident, f"What do you know about {name}?")
    return PHRASE in answer or f"{name} said" in answer

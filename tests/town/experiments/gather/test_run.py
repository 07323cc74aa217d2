"""Whole gather runs: everyone moves at once, thoughts run concurrently, memory is recalled."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from sqlmodel import select

from standins.llm.server import running
from town.experiments.gather import schemas as s
from town.experiments.gather.analysis import analyse
from town.experiments.gather.field import GOAL_SENDER, GatherConfig, torus_distance
from town.experiments.gather.log import AgentStep, CallLedger
from town.experiments.gather.memories import AgentMemories
from town.experiments.gather.messages import mentions
from town.experiments.gather.run import GatherRun
from town.llm.chain import think_with
from town.llm.client import open_client
from town.llm.embedders import HashEmbedder
from town.llm.port import Brain, OfflineBrain
from town.llm.task import Task
from town.store.db import Store
from town.store.models import Memory


def fake_admin(url: str, path: str, payload: Any = None) -> Any:
    root = url.removesuffix("/v1")
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(
        root + path, data=data, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def steps_of(records: list[AgentStep]) -> dict[tuple[int, str], AgentStep]:
    return {(r.step, r.agent): r for r in records}


def test_a_run_moves_everyone_at_once_and_logs_what_each_heard() -> None:
    config = GatherConfig(agents=12, steps=30, seed=5)
    records = asyncio.run(GatherRun(config, OfflineBrain()).run())
    by = steps_of(records)
    assert len(records) == 12 * 30
    for step in range(1, 30):
        now = [by[(step, f"agent{i}")] for i in range(12)]
        for r in now:
            before = by[(step - 1, r.agent)]
            assert (r.x, r.y) == (before.to_x, before.to_y)  # positions chain step to step
            senders = [
                o.agent
                for o in now
                if o.agent != r.agent and torus_distance((r.x, r.y), (o.x, o.y), 100) <= 5
            ]
            assert [f for f in r.heard_from if f != GOAL_SENDER] == senders
            assert (GOAL_SENDER in r.heard_from) == r.near_goal
            if step > 1:  # what it said came from what it heard a step earlier
                heard_goal = any(mentions(t, (50, 50)) for t in before.heard)
                assert mentions(r.message, (50, 50)) == heard_goal
    analysis = analyse(records, config)
    assert len(analysis.clustered) == 31 and sum(analysis.moves.values()) == 12 * 30


async def test_the_agents_of_a_step_think_concurrently() -> None:
    async with running(latency_ms=100) as url:
        client = open_client(url, "k", 5)
        ledger = CallLedger()
        brain, _handles = think_with(client, "m", usage=ledger, slots=16)  # (room for all)
        await GatherRun(GatherConfig(agents=6, steps=2), brain, ledger=ledger).run()
        await client.close()
        stats = await asyncio.to_thread(fake_admin, url, "/_fake/stats")
    assert stats["max_in_flight"] == 6
    assert ledger.total.calls == 24 and ledger.total.fallbacks == 0


# -- memory ------------------------------------------------------------------------------------


class Recording:
    """A brain that notes the inputs of every thought, answered by the offline brain."""

    name = "recording"

    def __init__(self) -> None:
        self.seen: list[tuple[str, BaseModel]] = []
        self.inner: Brain = OfflineBrain()

    async def run(self, task: Task[Any, Any], inputs: Any, *, resident: str | None = None) -> Any:
        self.seen.append((task.name, inputs))
        return await self.inner.run(task, inputs, resident=resident)


def test_with_memory_each_agent_recalls_its_own_past_into_its_prompts(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'memory.db'}")
    config = GatherConfig(agents=3, steps=4, seed=9, memory=True)
    brain = Recording()
    run = GatherRun(config, brain)
    run.memories = AgentMemories(store, HashEmbedder(), "gather-3", run.names)
    records = asyncio.run(run.run())
    assert {name for name, _ in brain.seen} == {"gather_message_memory", "gather_move_memory"}
    assert all(not r.memories for r in records if r.step == 0)
    later = [r for r in records if r.step == 3]
    assert all(r.memories for r in later)
    for r in later:  # an agent recalls its own steps only, from before this one
        own = {(p.step, p.x, p.y) for p in records if p.agent == r.agent and p.step < 3}
        for memory in r.memories:
            found = re.match(r"Step (\d+), (?:at|I moved \w+ from) \((\d+), (\d+)\)", memory)
            assert found is not None, memory
            assert tuple(int(g) for g in found.groups()) in own, memory
    prompts = [i for name, i in brain.seen if name == "gather_move_memory"]
    assert isinstance(prompts[-1], s.GatherMemoryInput) and prompts[-1].memories
    with store.session() as session:
        assert len(session.exec(select(Memory)).all()) >= 3 * 4 * 2
    store.dispose()

"""The gather experiment (Takata et al.): the torus, messages, move parsing, DBSCAN, whole runs."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import BaseModel
from sqlmodel import select
from typer.testing import CliRunner

from bot.cli.experiment import experiment_app, parse_agent_counts
from standins.llm.server import running
from town.experiments.gather import (
    GOAL_SENDER,
    NO_MESSAGES,
    AgentMemories,
    AgentStep,
    CallLedger,
    GatherConfig,
    GatherRun,
    deliver,
    in_range,
    mentions,
    parse_move,
    read_log,
    torus_distance,
)
from town.experiments.gather_analysis import analyse, cluster_labels, mean_pairwise_distance
from town.llm import schemas as s
from town.llm.client import open_client
from town.llm.gateway import LLMGateway
from town.llm.offline.brain import OfflineBrain
from town.llm.port import Brain
from town.llm.tasks import GATHER_MESSAGE, GATHER_MOVE, Task
from town.memory.embedders import HashEmbedder
from town.store.db import Store
from town.store.models import Memory

PAPER = GatherConfig(agents=4)
PNG = b"\x89PNG\r\n\x1a\n"
runner = CliRunner()


def cli() -> typer.Typer:
    """The sub-app mounted as ``bottown experiment`` mounts it."""
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """bottown"""

    app.add_typer(experiment_app, name="experiment")
    return app


def invoke(*args: str) -> Any:
    return runner.invoke(cli(), ["experiment", "gather", *args])


def fake_admin(url: str, path: str, payload: Any = None) -> Any:
    root = url.removesuffix("/v1")
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(
        root + path, data=data, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def gather_input(x: int, y: int, received: list[str], **more: Any) -> s.GatherInput:
    fields: dict[str, Any] = {"agent": "agent3", "x": x, "y": y, "size": 100}
    fields |= {"mission": PAPER.mission, "received": received}
    if "memories" in more:
        return s.GatherMemoryInput(**fields, **more)
    return s.GatherInput(**fields)


# -- the torus, the range, the goal ------------------------------------------------------------


def test_torus_distance_and_square_reception_range() -> None:
    assert torus_distance((99, 50), (1, 50), 100) == 2
    assert in_range((99, 50), (1, 50), 5, 100)
    assert not in_range((50, 50), (56, 50), 5, 100)
    assert in_range((50, 50), (55, 55), 5, 100)  # the square's corner is in range
    assert in_range((0, 0), (95, 95), 5, 100)  # both axes wrap
    assert not in_range((50, 50), (55, 56), 5, 100)


def test_messages_reach_agents_in_range_across_the_wrap_and_the_goal_speaks_near_it() -> None:
    names = ["agent0", "agent1", "agent2", "agent3", "agent4"]
    positions = [(99, 50), (1, 50), (50, 50), (56, 50), (45, 55)]
    boxes = deliver(names, positions, [f"hi from {n}" for n in names], PAPER)
    assert boxes[0] == [("agent1", "hi from agent1")]
    assert boxes[1] == [("agent0", "hi from agent0")]
    # agent2 at the goal hears agent4 (a corner of the square) but not agent3, 6 away
    assert boxes[2] == [("agent4", "hi from agent4"), (GOAL_SENDER, "You found the GOAL (50, 50)!")]
    assert boxes[3] == []  # 6 from the goal and from agent2: nothing
    assert boxes[4][-1] == (GOAL_SENDER, PAPER.goal_message)
    assert PAPER.goal_message == "You found the GOAL (50, 50)!"


# -- moves from free text ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("I think I'll head up.", ("up", True)),
        ("I'll move RIGHT to get closer.", ("right", True)),
        ("Going left, then maybe up later.", ("left", True)),
        ("I will stay put and wait for the others.", ("stay", True)),
        ("Heading north-east!", ("up", True)),
        ("All right, I go down.", ("down", True)),
        ('Of "up", "down", "left", "right" or "stay" I pick left.', ("left", True)),
        ("Let's keep working together as a team!", ("stay", False)),
        ("Updating the upstairs route.", ("stay", False)),
        ("", ("stay", False)),
    ],
)
def test_moves_are_parsed_from_free_text(reply: str, expected: tuple[str, bool]) -> None:
    assert parse_move(reply) == expected


def test_a_reply_that_is_not_json_is_taken_as_free_text() -> None:
    inputs = gather_input(10, 10, [])
    move = GATHER_MOVE.parse(inputs, "I think I'll head up.")
    assert move.move == "I think I'll head up."
    assert GATHER_MOVE.parse(inputs, '{"command": "down"}').move == "down"
    assert GATHER_MESSAGE.parse(inputs, '```json\n{"message": "hi"}\n```').message == "hi"
    with pytest.raises(ValueError):
        GATHER_MOVE.parse(inputs, "   ")


def test_the_prompts_follow_the_paper() -> None:
    _, alone = GATHER_MESSAGE.render(gather_input(49, 97, []))
    assert alone["content"].startswith(
        "You are agent3 at position (49, 97). Your mission is to gather at the goal with as many"
        " other agents as possible. You received messages from the surrounding agents: "
        "No Messages. What do you say to the other agents?"
    )
    _, heard = GATHER_MOVE.render(gather_input(45, 51, ["Hello!", PAPER.goal_message]))
    assert (
        'agents: ["Hello!", "You found the GOAL (50, 50)!"]. What is your next move'
        in (heard["content"])
    )
    assert '["up", "down", "left", "right", "stay"]' in heard["content"]
    assert NO_MESSAGES == "No Messages"


def test_the_offline_policy_heads_for_a_goal_it_is_told_of_and_otherwise_searches() -> None:
    brain = OfflineBrain()
    told = brain.answer(GATHER_MOVE, gather_input(45, 51, [PAPER.goal_message]))
    assert parse_move(told.move) == ("right", True)
    relayed = "agent7 here, at (60, 40). I heard the goal is at (50, 50). I am heading there."
    assert parse_move(brain.answer(GATHER_MOVE, gather_input(52, 90, [relayed])).move)[0] == "down"
    at_goal = brain.answer(GATHER_MOVE, gather_input(50, 50, [PAPER.goal_message]))
    assert parse_move(at_goal.move) == ("stay", True)
    says = brain.answer(GATHER_MESSAGE, gather_input(45, 51, [PAPER.goal_message])).message
    assert mentions(says, (50, 50)) and "found the GOAL" in says
    searching = [
        parse_move(brain.answer(GATHER_MOVE, gather_input(x, 20, [])).move) for x in range(10)
    ]
    assert all(parsed and move != "stay" for move, parsed in searching)
    assert len({move for move, _ in searching}) == 2  # a diagonal: two directions in turn
    remembered = 'Step 3, at (45, 51), I received: "You found the GOAL (50, 50)!"'
    alone = gather_input(40, 51, [], memories=[remembered])
    assert parse_move(brain.answer(GATHER_MOVE, alone).move) == ("right", True)


# -- the analysis ------------------------------------------------------------------------------


def test_dbscan_clusters_across_the_wrap_around() -> None:
    labels = cluster_labels([(99, 50), (1, 50), (50, 50), (30, 30), (35, 35)], 5, 100)
    assert labels[0] == labels[1] != -1
    assert labels[2] == -1
    assert labels[3] == labels[4] != -1 and labels[3] != labels[0]  # exactly 5 apart: in range
    apart = cluster_labels([(50, 50), (56, 50)], 5, 100)
    assert list(apart) == [-1, -1]


def test_message_diversity_is_the_mean_pairwise_cosine_distance() -> None:
    import numpy as np

    same = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    assert mean_pairwise_distance(same) == pytest.approx(0.0)
    mixed = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 0.0]])  # pairs: 1, 0, 1
    assert mean_pairwise_distance(mixed) == pytest.approx(2 / 3)


def logged(
    step: int, agent: str, at: tuple[int, int], message: str, heard: dict[str, str]
) -> AgentStep:
    return AgentStep(
        brain="test",
        agents=3,
        step=step,
        agent=agent,
        x=at[0],
        y=at[1],
        message=message,
        heard=list(heard.values()),
        heard_from=list(heard),
        near_goal=GOAL_SENDER in heard,
        reply="stay",
        move="stay",
        parsed=True,
        to_x=at[0],
        to_y=at[1],
    )


def test_the_goal_spreads_from_the_finder_to_agents_farther_away() -> None:
    told = "agent0 here: the GOAL is at (50, 50)!"
    records = [
        logged(0, "agent0", (47, 50), "hello", {GOAL_SENDER: PAPER.goal_message}),
        logged(0, "agent1", (38, 50), "hello", {}),
        logged(0, "agent2", (10, 10), "hello", {}),
        logged(1, "agent0", (47, 50), told, {"agent1": "hi", GOAL_SENDER: PAPER.goal_message}),
        logged(1, "agent1", (38, 50), "hi", {"agent0": told}),
        logged(1, "agent2", (10, 10), "alone", {}),
        logged(2, "agent0", (47, 50), told, {GOAL_SENDER: PAPER.goal_message}),
        logged(2, "agent1", (38, 50), "Go to 50,50 everyone", {"agent0": told}),
        logged(2, "agent2", (10, 10), "alone", {}),
    ]
    a = analyse(records, GatherConfig(agents=3))
    assert [(k.agent, k.step, k.source, k.distance) for k in a.first_known] == [
        ("agent0", 0, GOAL_SENDER, 3),
        ("agent1", 1, "agent0", 12),
    ]
    assert a.knowing == [1, 2, 2] and a.mentioning == [0, 1, 2]
    assert a.first_found == 0 and a.relayed == 1
    assert a.clustered == [0, 0, 0, 0] and a.near_goal == [1, 1, 1, 1]


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


# -- whole experiments through the command -------------------------------------------------------


def test_an_offline_run_writes_the_log_plots_and_table(tmp_path: Path) -> None:
    result = invoke("--agents", "3,6", "--steps", "12", "--seed", "4", "--out", "out")
    assert result.exit_code == 0, result.output
    out = Path("out")
    for n in (3, 6):
        lines = (out / f"log-{n}agents.jsonl").read_text("utf-8").splitlines()
        assert len(lines) == n * 12
        first = json.loads(lines[0])
        assert first["brain"] == "offline brain" and first["step"] == 0
        assert {"x", "y", "message", "heard", "reply", "move", "parsed"} <= set(first)
    for name in ("clusters", "moves", "goal_spread", "diversity", "positions"):
        data = (out / f"{name}.png").read_bytes()
        assert data.startswith(PNG) and len(data) > 5000, name
    summary = (out / "summary.csv").read_text("utf-8").splitlines()
    assert len(summary) == 3 and summary[0].startswith("agents,brain,steps,clustered at end")
    assert all(",offline brain,12," in row for row in summary[1:])
    assert "| 6 | offline brain | 12 |" in (out / "summary.md").read_text("utf-8")
    assert len((out / "series.csv").read_text("utf-8").splitlines()) == 1 + 2 * 13
    meta = json.loads((out / "run.json").read_text("utf-8"))
    assert meta["brain"] == "offline brain" and meta["agents"] == [3, 6] and meta["seed"] == 4
    assert "Gather experiment (offline brain)" in result.output
    again = invoke("--agents", "6", "--steps", "12", "--seed", "4", "--out", "again")
    assert again.exit_code == 0, again.output
    same = Path("again/log-6agents.jsonl").read_text("utf-8")
    assert same == (out / "log-6agents.jsonl").read_text("utf-8")  # the seed fixes the run
    assert read_log(out / "log-6agents.jsonl")[0].agents == 6


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agents", "5,x"], "--agents must be whole numbers"),
        (["--agents", "5,,10"], "--agents must be whole numbers"),
        (["--agents", "0"], "--agents must be whole numbers"),
        (["--steps", "0"], "--steps"),
        (["--brain", "llm"], "--brain llm needs BOTTOWN_LLM_BASE_URL"),
        (["--brain", "smart"], "--brain must be offline or llm"),
        (["--diversity", "vibes"], "--diversity must be one of"),
    ],
)
def test_bad_input_gets_a_clear_error(args: list[str], message: str) -> None:
    result = invoke(*args, "--out", "out")
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
    assert not Path("out").exists()  # refused before anything is written


def test_an_unwritable_out_folder_gets_a_clear_error() -> None:
    Path("a-file").write_text("not a folder", encoding="utf-8")
    result = invoke("--agents", "2", "--steps", "2", "--out", "a-file/out")
    assert result.exit_code == 2
    assert "cannot write to --out a-file/out" in " ".join(result.output.split())
    assert parse_agent_counts(" 5, 10,5 ") == [5, 10]


def test_a_run_against_the_fake_llm_server_goes_over_the_wire(
    fake_llm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOTTOWN_LLM_BASE_URL", fake_llm)
    monkeypatch.setenv("BOTTOWN_LLM_MODEL", "bottown-fake")
    result = invoke("--agents", "4", "--steps", "3", "--seed", "2", "--brain", "llm", "--out", "o")
    assert result.exit_code == 0, result.output
    stats = fake_admin(fake_llm, "/_fake/stats")
    assert stats["by_task"] == {"gather_message": 12, "gather_move": 12}
    sent = stats["last_requests"][-1]
    assert sent["temperature"] == 0.1 and sent["max_tokens"] == 256
    records = read_log("o/log-4agents.jsonl")
    assert {r.brain for r in records} == {"LLM bottown-fake"}
    assert not any(r.fallback for r in records)
    meta = json.loads(Path("o/run.json").read_text("utf-8"))
    assert meta["usage"]["calls"] == 24 and meta["usage"]["fallbacks"] == 0
    offline = asyncio.run(GatherRun(GatherConfig(agents=4, steps=3, seed=2), OfflineBrain()).run())
    assert [(r.message, r.reply, r.to_x, r.to_y) for r in records] == [
        (r.message, r.reply, r.to_x, r.to_y) for r in offline
    ]


def test_llm_failures_are_answered_offline_and_marked_in_the_log(
    fake_llm: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BOTTOWN_LLM_BASE_URL", fake_llm)
    monkeypatch.setenv("BOTTOWN_LLM_MAX_ATTEMPTS", "1")
    fake_admin(fake_llm, "/_fake/faults", {"queue": ["500"]})
    result = invoke("--agents", "3", "--steps", "2", "--brain", "llm", "--out", "o")
    assert result.exit_code == 0, result.output
    records = read_log("o/log-3agents.jsonl")
    assert sum(r.fallback for r in records) == 1
    assert "1 of 12 answers came from the offline brain" in " ".join(result.output.split())


async def test_the_agents_of_a_step_think_concurrently() -> None:
    async with running(latency_ms=100) as url:
        client = open_client(url, "k", 5)
        ledger = CallLedger()
        gateway = LLMGateway(client, model="m", usage=ledger, concurrency=16)
        await GatherRun(GatherConfig(agents=6, steps=2), gateway, ledger=ledger).run()
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


def test_the_memory_flag_runs_with_memory_streams_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    result = invoke("--agents", "3", "--steps", "3", "--memory", "--out", "m")
    assert result.exit_code == 0, result.output
    records = read_log("m/log-3agents.jsonl")
    assert {r.brain for r in records} == {"offline brain, memory"}
    assert all(r.memories for r in records if r.step > 0)
    assert Path("m/memory.db").stat().st_size > 0
    assert json.loads(Path("m/run.json").read_text("utf-8"))["memory"] is True

"""What a gather run shows: DBSCAN across the wrap, message diversity, how the goal spreads."""

from __future__ import annotations

import pytest

from town.experiments.gather.analysis import analyse, cluster_labels, mean_pairwise_distance
from town.experiments.gather.field import GOAL_SENDER, GatherConfig
from town.experiments.gather.log import AgentStep

PAPER = GatherConfig(agents=4)


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

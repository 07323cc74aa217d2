"""The gather field and messages: the torus, delivery in range, moves from free text, the
prompts and the offline brain's policy."""

from __future__ import annotations

from typing import Any

import pytest

from town.experiments.gather import schemas as s
from town.experiments.gather.field import GOAL_SENDER, GatherConfig, in_range, torus_distance
from town.experiments.gather.messages import deliver, mentions, parse_move
from town.experiments.gather.tasks import GATHER_MESSAGE, GATHER_MOVE
from town.llm.port import OfflineBrain

PAPER = GatherConfig(agents=4)


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

"""The interviewers of a town: ``interviews.toml``, read and checked against the town."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import pytest

from tests.town.features.coaching.test_session import (
    DANA,
    PRACTICE,
    interviews,
)
from town.llm.port import OfflineBrain
from town.llm.schemas import PlanDayInput
from town.llm.tasks import PLAN_DAY
from town.world.load import load_town
from town.world.persona import PersonaError


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / PRACTICE
    shutil.copytree(str(resources.files("personas") / PRACTICE), folder)
    return folder


def test_the_town_loads_with_its_interviewers_and_rooms() -> None:
    spec, found = load_town(PRACTICE), interviews()
    assert [i.resident for i in found.interviewers] == [DANA, "Priya Raman", "Marcus Bell"]
    assert found.interviewer_in("interview room b: armchairs") == found.interviewer("Priya")
    assert found.interviewer_in("Lobby") is None
    for interviewer in found.interviewers:
        person = spec.resident(interviewer.resident)
        assert person.workplace.startswith(interviewer.room)
        assert len(interviewer.topics()) >= 4
        assert all(q.text.count("?") <= 1 for q in interviewer.questions)


def test_the_interviewers_day_keeps_them_in_their_rooms_after_lunch() -> None:
    """Routine times like "1:30 pm" are afternoon times (the offline planner once read 01:30)."""
    dana = load_town(PRACTICE).resident(DANA)
    plan = OfflineBrain().answer(
        PLAN_DAY,
        PlanDayInput(
            resident=DANA,
            summary="",
            yesterday="",
            date="Monday March 4, 2024",
            wake_time=dana.wake_time,
            routine=list(dana.routine),
            places=[dana.home, dana.workplace, "Lobby"],
        ),
    )
    chunks = [(c.start, c.location, c.description) for c in plan.chunks]
    assert chunks[1] == (
        "08:30",
        "Interview Room A: interview table",
        "arriving at Interview Room A and set up the whiteboard",
    )
    assert ("12:30", "Lobby") in [c[:2] for c in chunks]
    assert ("13:30", "Interview Room A: interview table") in [c[:2] for c in chunks]
    assert ("18:30", dana.home) in [c[:2] for c in chunks]


def test_the_loader_rejects_a_bad_interview_town_with_file_field_and_reason(
    tmp_path: Path,
) -> None:
    folder = _copy(tmp_path)
    file = folder / "interviews.toml"
    text = file.read_text("utf-8")
    for old, new in [
        ('resident = "Dana Whitfield"', 'resident = "Dana Whitfeld"'),
        ('id = "hardest_bug"', 'id = "payout_design"'),
        ("questions_per_session = 4", "questions_per_session = 12"),
        (
            'text = "Tell me about a time you failed at something that mattered."',
            'text = "Did you ever fail? What happened?"',
        ),
        ('room = "Interview Room C"', 'room = "Interview Room Q"'),
    ]:
        assert old in text
        text = text.replace(old, new, 1)
    file.write_text(text, "utf-8")
    with pytest.raises(PersonaError) as caught:
        interviews(folder)
    assert sorted(caught.value.problems) == sorted(
        f"interviews.toml: interviewers[{problem}"
        for problem in (
            "0].resident: 'Dana Whitfeld' is not a resident in residents.toml "
            "(did you mean 'Dana Whitfield'?)",
            "0].questions[2].id: 'payout_design' is already questions[0]",
            "0].questions_per_session: 12 is more than the 10 questions in the bank",
            "1].questions[2].text: asks 2 questions; one question at a time",
            "2].room: 'Interview Room Q' is not a place in town.toml "
            "(did you mean 'Interview Room C'?)",
            "2].room: Marcus Bell works in 'Interview Room C' (residents.toml), not in "
            "'Interview Room Q'; an interviewer's workplace is its room",
        )
    )
    assert str(caught.value).startswith(f"{folder}: 6 problems")


def test_a_broken_interviews_file_and_a_missing_one(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    (folder / "interviews.toml").write_text("[[interviewers]]\nresident = 3\n", "utf-8")
    with pytest.raises(PersonaError) as caught:
        interviews(folder)
    assert "interviews.toml: interviewers[0].resident: input should be a valid string" in str(
        caught.value
    )
    assert "interviews.toml: interviewers[0].questions: required field is missing" in str(
        caught.value
    )
    (folder / "interviews.toml").unlink()  # optional: a town without interviewers
    assert interviews(folder).interviewers == []

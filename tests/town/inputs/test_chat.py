"""Who answers a visitor's words (``town.inputs.chat.responders``): the rule, on rows."""

from __future__ import annotations

from tests.factories import resident_row
from town.inputs.chat import Thread, responders
from town.store.models import Resident


def _people(*awake: str, asleep: tuple[str, ...] = ()) -> list[Resident]:
    return [resident_row(n, state={"awake": True}) for n in awake] + [
        resident_row(n, state={"awake": False}) for n in asleep
    ]


def _names(found: list[Resident]) -> list[str]:
    return [r.name for r in found]


def test_a_reply_to_a_residents_message_makes_that_resident_answer() -> None:
    here = _people("Isabella Rodriguez", "Klaus Mueller", "Maria Lopez")
    talk = Thread(answered_by=["Isabella Rodriguez"])  # without the reply, she would go on
    found = responders("That sounds lovely, tell me more", here, talk, "Klaus Mueller")
    assert _names(found) == ["Klaus Mueller"]


def test_the_resident_replied_to_answers_first_beside_one_named() -> None:
    here = _people("Isabella Rodriguez", "Klaus Mueller", "Maria Lopez")
    found = responders("Maria, do you agree?", here, Thread(), "Klaus Mueller")
    assert _names(found) == ["Klaus Mueller", "Maria Lopez"]
    # named and replied to at once: one answer, not two
    found = responders("Klaus, really?", here, Thread(), "Klaus Mueller")
    assert _names(found) == ["Klaus Mueller"]


def test_a_reply_cannot_make_a_non_resident_an_absent_or_an_asleep_resident_answer() -> None:
    here = _people("Isabella Rodriguez", asleep=("Klaus Mueller",))
    for replied in ("Klaus Mueller", "Maria Lopez", "Bottown", "Alice"):
        found = responders("and then what?", here, Thread(), replied)
        assert _names(found) == ["Isabella Rodriguez"], replied  # as if nobody were replied to
    # the name must be the resident's whole name, as the platform posted it
    assert _names(responders("hm", here, Thread(), "isabella")) == ["Isabella Rodriguez"]
    found = responders("hm", _people(asleep=("Klaus Mueller",)), Thread(), "Klaus Mueller")
    assert found == []


def test_without_a_reply_the_rule_is_unchanged() -> None:
    here = _people("Isabella Rodriguez", "Klaus Mueller")
    assert _names(responders("Hi Klaus", here, Thread(), "")) == ["Klaus Mueller"]
    assert len(responders("hello everyone", here, Thread())) == 2

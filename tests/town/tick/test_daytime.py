"""An action names no part of the day other than the one it is shown in: the words are fitted
where plan items are made (``town/tick/planning.py``), for the model's plans as for the offline
brain's."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from town.llm import schemas as s
from town.store.db import Store
from town.tick.engine import Engine
from town.tick.planning import _store
from town.world.daytime import fitted

TUESDAY = datetime(2023, 2, 14, tzinfo=UTC)


@pytest.mark.parametrize(
    ("said", "at", "minutes", "shown"),
    [
        ("writing jokes in the afternoon", "17:40", 20, "writing jokes"),
        ("taking client calls in the afternoon", "18:10", 10, "taking client calls"),
        ("writing jokes in the afternoon", "14:00", 20, "writing jokes in the afternoon"),
        ("writing jokes in the afternoon", "16:50", 20, "writing jokes"),  # (until 17:10)
        ("writing jokes in the afternoon, for a while", "17:00", 60, "writing jokes, for a while"),
        ("walking around noon", "14:00", 10, "walking"),
        ("working in his study in the evening", "16:20", 10, "working in his study"),
        ("painting again until late at night", "19:00", 10, "painting again"),
        ("painting again until late at night", "23:30", 10, "painting again until late at night"),
        ("having dinner tonight", "10:00", 10, "having dinner"),
        # a part of the day that names a thing, not a time, stays
        ("reading the morning paper", "13:00", 10, "reading the morning paper"),
        ("photographing the pond in the morning light", "15:00", 10,
         "photographing the pond in the morning light"),
        ("running every morning and then stretching", "15:00", 10, "running and then stretching"),
    ],
)  # fmt: skip
def test_words_for_another_part_of_the_day_go(said: str, at: str, minutes: int, shown: str) -> None:
    hour, minute = map(int, at.split(":"))
    assert fitted(said, TUESDAY.replace(hour=hour, minute=minute), minutes) == shown


async def test_a_models_action_at_1740_is_stored_without_the_afternoon(
    store: Store, engine: Engine
) -> None:
    """The model's decomposition and the offline brain's plans meet in ``_store``: an action
    from 17:40 says "writing jokes", and a chunk is read at its start (13:00: afternoon)."""
    with store.session() as session:
        tick = engine.new_tick(session, TUESDAY.replace(hour=17, minute=40))
        row = next(iter(tick.residents.values()))
        said = "writing jokes in the afternoon"
        chunk = s.PlanItem(start="13:00", duration_min=360, location=row.location, description=said)
        action = chunk.model_copy(update={"start": "17:40", "duration_min": 20})
        (day,) = await _store(tick, row, [chunk], "day", None)
        (done,) = await _store(tick, row, [action], "action", day)
    assert (day.description, done.description) == (said, "writing jokes")

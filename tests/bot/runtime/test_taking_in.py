"""A town takes in what a gateway process stored for it: woken by its doorbell (a poll on
SQLite, PostgreSQL's LISTEN/NOTIFY), each input handled once, in order, as the adapter would."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError
from sqlmodel import col, select

from bot.runtime.gateway import StoredTown
from bot.runtime.taking_in import Doorbell
from bot.runtime.watch import Watch
from tests.adapters.discord.support import until
from tests.factories import add_town
from town.features.ratings.reactions import Reacted
from town.inputs.visit import Visit
from town.store import waiting
from town.store.db import Store
from town.store.models import ChatLine, WaitingInput

pytest_plugins = ["tests.servers"]


@contextlib.asynccontextmanager
async def ringing(bell: Doorbell, runtime: Any) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(bell.run()), asyncio.create_task(bell.keep_taking(runtime))]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


def visitors_lines(runtime: Any) -> list[str]:
    with runtime.store.session() as s:
        query = select(ChatLine).where(ChatLine.kind == "visitor").order_by(col(ChatLine.id))
        return [f"{line.speaker}: {line.text}" for line in s.exec(query).all()]


def left_waiting(store: Store) -> int:
    with store.session() as s:
        return len(s.exec(select(WaitingInput)).all())


async def test_the_town_takes_in_what_a_gateway_stored_once_and_in_order(runtime: Any) -> None:
    gateway_side = StoredTown(runtime.store, runtime.town_id, runtime.town_name, Watch())
    for words in ("good morning", "is the cafe open?"):
        visit = Visit.of("Hobbs Cafe", "Mallory", words, "discord", "42")
        await gateway_side.visitor_says(visit)
    reaction = Reacted("discord", "42", "Mallory", "123", "👍")
    assert await gateway_side.reacted(reaction)
    assert left_waiting(runtime.store) == 3 and visitors_lines(runtime) == []
    bell = Doorbell(runtime.store, poll_s=0.01)
    async with ringing(bell, runtime):
        await until(lambda: left_waiting(runtime.store) == 0 and len(visitors_lines(runtime)) == 2)
        await gateway_side.visitor_says(
            Visit.of("Hobbs Cafe", "Mallory", "hello?", "discord", "42")
        )
        await until(lambda: len(visitors_lines(runtime)) == 3)  # the poll rang again
    assert visitors_lines(runtime) == [
        "Mallory: good morning",
        "Mallory: is the cafe open?",
        "Mallory: hello?",
    ]
    assert left_waiting(runtime.store) == 0


def test_postgresql_notifies_a_waiting_input_at_its_commit(postgres_url: str) -> None:
    store = Store.open(postgres_url)
    try:
        with store.session() as s:
            town_id = add_town(s, "Alpha").id
        assert town_id is not None
        heard: list[tuple[int, int]] = []  # (town, inputs it found waiting when told)
        told = threading.Event()

        def on_heard(town: int) -> None:
            heard.append((town, len(waiting.take(store, town))))
            told.set()

        stop = threading.Event()
        listening = threading.Thread(target=waiting.listen, args=(store, on_heard, stop))
        listening.start()
        try:
            for _ in range(100):  # until its LISTEN is in: a notification before it is not kept
                waiting.keep(store, town_id, "words", {"n": 1})
                if told.wait(0.1):
                    break
        finally:
            stop.set()
            listening.join()
        assert heard and heard[0][0] == town_id and heard[0][1] >= 1  # the row was there
    finally:
        store.dispose()


async def test_a_database_blip_delays_the_inputs_and_loses_none(
    runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_take, real_poll = waiting.take, waiting.towns_waiting
    failures = {"take": 1, "poll": 1}

    def flaky(name: str, real: Any) -> Any:
        def call(*args: Any) -> Any:
            if failures[name]:
                failures[name] -= 1
                raise OperationalError("select", {}, Exception("the server closed the connection"))
            return real(*args)

        return call

    monkeypatch.setattr(waiting, "take", flaky("take", real_take))
    monkeypatch.setattr(waiting, "towns_waiting", flaky("poll", real_poll))
    gateway_side = StoredTown(runtime.store, runtime.town_id, runtime.town_name, Watch())
    await gateway_side.visitor_says(
        Visit.of("Hobbs Cafe", "Mallory", "still there?", "discord", "42")
    )
    async with ringing(Doorbell(runtime.store, poll_s=0.01), runtime):
        await until(lambda: visitors_lines(runtime) == ["Mallory: still there?"])
    assert failures == {"take": 0, "poll": 0} and left_waiting(runtime.store) == 0

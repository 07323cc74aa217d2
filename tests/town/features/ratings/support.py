"""Residents' messages as a pump leaves them (an outbox row, a sent delivery), for the ratings'
tests."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import count
from typing import Any

from town.store.db import Store
from town.store.models import Delivery, OutboxEvent

_keys = count(1)


def shown(
    store: Store,
    town_id: int,
    resident: str,
    text: str,
    *,
    area: str = "Hobbs Cafe",
    platform: str = "web",
    **data: Any,
) -> str:
    """A resident's message delivered to ``platform``; returns the platform's id for it."""
    n = next(_keys)
    message_id = f"{platform}:m{n}"
    with store.session() as s:
        event = OutboxEvent(
            town_id=town_id,
            channel=area,
            kind=str(data.pop("kind", "said")),
            payload={"resident": resident, "text": text, **data},
            game_time=datetime(2023, 2, 13, 9, 0, tzinfo=UTC),
            idempotency_key=f"ratings-test:{n}",
        )
        s.add(event)
        s.flush()
        assert event.id is not None
        s.add(Delivery(outbox_id=event.id, platform=platform, status="sent", message_id=message_id))
    return message_id

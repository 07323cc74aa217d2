"""A live A/B of two models: a town served by two fake-server models split by resident (the
second one marks its speech), raters who prefer the marked model's messages, and ``eval
live --by model`` finding that model ahead, its interval clear of the other's."""

from __future__ import annotations

import random
from pathlib import Path

from sqlmodel import col, select

from adapters.core.delivery import OutboxPump
from bot.runtime.settings import load_settings
from standins.llm.marked import running_marked
from tests.factories import open_runtime
from tests.fakes.platform import FakePlatform
from town.experiments.live import live_figures
from town.features.ratings.reactions import Reacted
from town.inputs.visit import Visit
from town.store.models import Delivery, OutboxEvent

MARK = "✦"


async def test_raters_who_prefer_one_model_put_it_ahead(fake_llm: str, tmp_path: Path) -> None:
    async with running_marked(MARK) as marked_url:
        settings = load_settings(
            data_dir=tmp_path / "data",
            embedder="hash",
            brain="llm",
            llm_base_url=fake_llm,
            llm_model="model-a",
            llm_base_url_b=marked_url,
            llm_model_b="model-b",
            visitor_messages_per_minute=0,
        )
        runtime = await open_runtime(settings)
        try:
            models = runtime.opened.engine.llm.models
            assert [m.model for m in models] == ["model-a", "model-b"]
            for _ in range(4):  # 07:30: Isabella and Klaus at the cafe
                await runtime.opened.engine.tick()
            for n in range(8):
                for name in ("Isabella", "Klaus"):
                    line = f"{name}, what do you recommend today?"
                    await runtime.visitor_says(
                        Visit.of("Hobbs Cafe", f"Visitor {n}", line, "web", f"v{n}")
                    )
            platform = FakePlatform(name="web")
            await OutboxPump(runtime.store, runtime.town_id, platform).deliver_pending()

            with runtime.store.session() as s:
                shown = s.exec(
                    select(OutboxEvent, Delivery.message_id)
                    .join(Delivery, col(Delivery.outbox_id) == col(OutboxEvent.id))
                    .where(OutboxEvent.kind == "said")
                ).all()
            raters = random.Random(7)  # each rater likes the marked words 9 times in 10
            for event, message_id in shown:
                marked = MARK in event.payload["text"]
                assert event.payload["model"] == ("model-b" if marked else "model-a")
                for rater in range(3):
                    likes = (raters.random() < 0.9) == marked
                    emoji = "👍" if likes else "👎"
                    await runtime.reacted(Reacted("web", f"r{rater}", "Rater", message_id, emoji))

            with runtime.store.session() as s:
                figures = live_figures(s, runtime.town_id, settings.moods, by="model", since=None)
            got = {g.name: g for g in figures.groups}
            a, b = got["model-a"], got["model-b"]
            assert a.rated_up + a.rated_down >= 5 and b.rated_up + b.rated_down >= 5
            assert a.share_up is not None and b.share_up is not None
            assert b.share_up > a.share_up
            assert a.high is not None and b.low is not None and b.low > a.high, figures
            assert a.strength is not None and b.strength is not None and b.strength > a.strength
        finally:
            runtime.opened.services.close()

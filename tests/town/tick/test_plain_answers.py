"""What a model writes is stored plain (``town.tick.plain_answers``): against a server whose
every text begins with pings and mention syntax, no summary, state, plan or memory holds them,
and the web's ``GET /api/resident`` serves none."""

from __future__ import annotations

from pathlib import Path

import aiohttp
from sqlmodel import select

from adapters.web.server import WebAdapter
from bot.runtime.settings import load_settings
from standins.llm.server import running
from tests.factories import open_runtime
from tests.fakes.brain import ScriptedBrain
from town.llm import made
from town.llm.schemas import SummarizeInput, SummarizeResult
from town.llm.tasks import SUMMARIZE
from town.store.models import Memory, PlanItem, Resident
from town.tick.plain_answers import PlainAnswers, plain_result

PINGS = "@everyone <!channel> <@U0123456789> hi"
MARKS = ("@everyone", "<!channel>", "<@U", "@here")


def pinged(text: str) -> bool:
    return any(mark in text for mark in MARKS)


async def test_a_models_pings_are_never_stored_nor_served(tmp_path: Path) -> None:
    async with running(says=PINGS) as url:
        settings = load_settings(
            data_dir=tmp_path, embedder="hash", brain="llm", llm_base_url=url, llm_model="m"
        )
        runtime = await open_runtime(settings)
        web = WebAdapter(runtime, runtime.store, runtime.town_id, host="127.0.0.1", port=0)
        await web.start()
        try:
            for _ in range(6):  # the residents wake, sum themselves up, plan and act
                await runtime.opened.engine.tick()
            with runtime.store.session() as s:
                residents = s.exec(select(Resident)).all()
                texts = [r.summary for r in residents] + [r.action for r in residents]
                texts += [str(r.state) for r in residents]
                texts += [p.description for p in s.exec(select(PlanItem)).all()]
                texts += [m.text for m in s.exec(select(Memory)).all()]
            async with aiohttp.ClientSession() as http:
                card = f"{web.url}/api/resident"
                cards = [
                    await (await http.get(card, params={"name": r.name})).text() for r in residents
                ]
        finally:
            await web.stop()
            runtime.opened.services.close()
    summaries = [r.summary for r in residents]
    assert any(s.startswith("hi ") for s in summaries)  # the model's words, its pings gone
    assert not [t for t in texts if pinged(t)]
    assert not [c for c in cards if pinged(c)]


async def test_a_plain_answer_keeps_who_made_it() -> None:
    scripted = ScriptedBrain()
    scripted.enqueue(SUMMARIZE.name, SummarizeResult(summary=f"{PINGS} there"))
    brain = PlainAnswers(scripted)
    answer = await brain.run(SUMMARIZE, SummarizeInput(resident="Ann", memories=[]))
    assert answer.summary == "hi there"
    stamped = made.stamp(SummarizeResult(summary="<!here> ok"), "model-x")
    assert made.made_by(plain_result(stamped)) == "model-x"

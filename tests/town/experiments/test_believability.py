"""The believability interviews: questions as data, the four conditions on the three-resident
town with the offline brain, rankings -> TrueSkill, the CLI, and the rating page in Chromium."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from bot.cli.eval_interview import interview as interview_cmd
from bot.cli.eval_interview import rate as rate_cmd
from bot.eval_ui.rating_page import RatingSession, start
from tests.browser import chromium_page
from tests.factories import MINITOWN, make_engine
from town.experiments.believability import (
    CONDITIONS,
    Ranking,
    append_ranking,
    load_questions,
    read_answers,
    read_rankings,
    run_interviews,
    trueskill_table,
    write_answers,
)
from town.llm.port import OfflineBrain
from town.llm.schemas import InterviewInput
from town.llm.task import Task
from town.llm.tasks import INTERVIEW
from town.store.db import Store

ORDER = ["full", "no-reflection", "no-planning", "no-memory"]


class RecordingBrain:
    """The offline brain, keeping every interview's inputs."""

    def __init__(self) -> None:
        self.offline = OfflineBrain()
        self.interviews: list[InterviewInput] = []

    async def run(self, task: Task[Any, Any], inputs: Any, *, resident: str | None = None) -> Any:
        if task is INTERVIEW:
            self.interviews.append(inputs)
        return await self.offline.run(task, inputs, resident=resident)


def test_questions_are_data_in_five_categories() -> None:
    questions = load_questions()
    by_category: dict[str, int] = {}
    for q in questions:
        by_category[q.category] = by_category.get(q.category, 0) + 1
    assert by_category == dict.fromkeys(
        ["self-knowledge", "memory", "plans", "reactions", "reflections"], 5
    )
    assert len({q.id for q in questions}) == 25
    who = next(q for q in questions if q.id == "memory-1")
    assert who.filled("Klaus Mueller", "Maria Lopez") == "Who is Maria Lopez?"


def test_conditions_limit_the_memory_kinds() -> None:
    assert CONDITIONS["full"] is None and CONDITIONS["no-memory"] == ()
    assert "reflection" not in (CONDITIONS["no-reflection"] or ())
    assert "plan" in (CONDITIONS["no-reflection"] or ())
    assert not {"reflection", "plan"} & set(CONDITIONS["no-planning"] or ())


def test_trueskill_table_full_always_wins() -> None:
    rankings = [Ranking(f"r|q{i}", tuple(ORDER), "rater", "") for i in range(30)]
    table = trueskill_table(rankings, ORDER)
    assert [r.condition for r in table] == ORDER  # best mu first, in the rankings' order
    assert table[0].mu > 29 and table[-1].mu < 21
    assert all(r.sigma < 25 / 3 and r.rankings == 30 for r in table)
    assert table[0].paper_mu == 29.89 and table[-1].paper_mu == 21.21
    reverse = trueskill_table([Ranking("x", tuple(reversed(ORDER)), "r", "")], ORDER)
    assert reverse[0].condition == "no-memory"
    assert trueskill_table([], ORDER)[0].mu == 25.0  # no rankings: the prior


async def test_four_conditions_on_the_test_town(store: Store, tmp_path: Path) -> None:
    brain = RecordingBrain()
    engine = await make_engine(store, brain)
    residents = [r.name for r in engine.spec.residents]
    questions = [q for q in load_questions() if q.id in ("self-1", "memory-1", "plans-1")]
    answers = await run_interviews(engine, residents, list(CONDITIONS), questions)
    assert len(answers) == len(residents) * 3 * 4 == len(brain.interviews)
    assert all(a.answer for a in answers)
    asked = list(zip(answers, brain.interviews, strict=True))
    full = [i for a, i in asked if a.condition == "full"]
    none = [i for a, i in asked if a.condition == "no-memory"]
    assert any(i.memories for i in full)  # the full architecture sees the seed memories
    assert none and all(i.memories == [] for i in none)  # no memory retrieves nothing
    who = next(a for a in answers if a.question_id == "memory-1" and a.condition == "full")
    assert who.question == f"Who is {residents[1]}?"
    forgetful = next(a for a in answers if a.question_id == "memory-1" and a.condition != "full")
    assert forgetful.resident == residents[0]

    files = write_answers(answers, tmp_path / "run")
    assert read_answers(tmp_path / "run") == answers
    with files[1].open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(answers) and rows[0]["condition"] == "full"


def cli() -> typer.Typer:
    app = typer.Typer()
    sub = typer.Typer()
    sub.command()(interview_cmd)
    sub.command()(rate_cmd)
    app.add_typer(sub, name="eval")
    return app


def test_cli_interview_then_table_and_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.cli.main import app as bottown

    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    runner = CliRunner()
    sim = runner.invoke(
        bottown, ["simulate", "--town", str(MINITOWN), "--name", "mini", "--days", "0.02"]
    )
    assert sim.exit_code == 0, sim.output
    app = cli()
    args = ["eval", "interview", "--town", "mini", "--residents", "2", "--out", "run"]
    done = runner.invoke(app, [*args, "--conditions", "full,no-memory", "--brain", "offline"])
    assert done.exit_code == 0, done.output
    assert "100 answers: 2 resident(s) x 25 questions x 2 condition(s)" in done.output
    lines = Path("run/answers.jsonl").read_text().splitlines()
    assert len(lines) == 100 and Path("run/answers.csv").is_file()

    key = json.loads(lines[0])["resident"] + "|self-1"
    append_ranking(Path("run"), key, ["full", "no-memory"], "ann")
    table = runner.invoke(app, ["eval", "rate", "--run", "run", "--table"])
    assert table.exit_code == 0, table.output
    assert (
        "TrueSkill" in table.output and "29.89" in table.output and "1 ranking(s)" in table.output
    )
    full_row = next(line for line in table.output.splitlines() if "│ full" in line)
    assert "29.40" in full_row  # 25 + one win over an equal opponent (default env)

    missing = runner.invoke(app, ["eval", "rate", "--run", "nowhere", "--table"])
    assert missing.exit_code == 2 and "no run folder 'nowhere'" in missing.output
    bad = runner.invoke(app, [*args, "--conditions", "full,no-dreams"])
    assert bad.exit_code == 2 and "unknown condition(s) no-dreams" in bad.output
    no_town = runner.invoke(app, ["eval", "interview", "--town", "atlantis"])
    assert no_town.exit_code == 2 and "no town named 'atlantis'" in no_town.output


def small_run(folder: Path) -> None:
    rows = [
        {
            "resident": "Klaus Mueller",
            "question_id": qid,
            "category": "memory",
            "question": question,
            "condition": condition,
            "answer": f"<b>{condition}</b> answer to {qid}",
        }
        for qid, question in (("memory-1", "Who is Maria?"), ("memory-2", "Who runs?"))
        for condition in ORDER
    ]
    folder.mkdir()
    (folder / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


async def test_rating_page_api_keeps_partial_rankings(tmp_path: Path) -> None:
    import aiohttp

    small_run(tmp_path / "run")
    session = RatingSession.open(tmp_path / "run")
    runner, url = await start(session)
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(url + "api/next", params={"rater": "ann"}) as r:
                item = await r.json()
            assert item["left"] == 2 and len(item["answers"]) == 4
            assert all(set(a) == {"id", "text"} for a in item["answers"])  # no condition names
            ids = [a["id"] for a in item["answers"]]
            async with http.post(
                url + "api/rank", json={"token": item["token"], "order": ids[:2], "rater": "ann"}
            ) as r:
                assert r.status == 400 and "exactly once" in (await r.json())["error"]
            async with http.post(
                url + "api/rank", json={"token": "stale", "order": ids, "rater": "ann"}
            ) as r:
                assert r.status == 409
            async with http.post(
                url + "api/rank", json={"token": item["token"], "order": ids, "rater": "ann"}
            ) as r:
                assert r.status == 200 and (await r.json())["rankings"] == 1
            async with http.get(url + "api/next", params={"rater": "ann"}) as r:
                assert (await r.json())["left"] == 1  # the rater closes the page here
    finally:
        await runner.cleanup()
    kept, bad = read_rankings(tmp_path / "run")
    assert bad == 0 and len(kept) == 1 and sorted(kept[0].order) == sorted(ORDER)
    assert kept[0].item == "Klaus Mueller|memory-1"
    with (tmp_path / "run" / "rankings.jsonl").open("a") as f:
        f.write('{"item": "Klaus')  # a write cut short
    append_ranking(tmp_path / "run", "Klaus Mueller|memory-2", ORDER, "bob")
    kept, bad = read_rankings(tmp_path / "run")
    assert bad == 1 and [r.rater for r in kept] == ["ann", "bob"]


async def test_a_rater_in_the_browser_ranks_and_sees_ratings_change(tmp_path: Path) -> None:
    from playwright.async_api import expect

    small_run(tmp_path / "run")
    runner, url = await start(RatingSession.open(tmp_path / "run"))
    try:
        async with chromium_page() as browser:
            page = browser.page
            await page.goto(url)
            await expect(page.locator("#question")).to_have_text("Who is Maria?")
            await expect(page.locator("#count")).to_have_text("0 ranking(s) stored")
            cells = page.locator("#ratings tbody tr td:nth-child(2)")
            await expect(cells).to_have_text(["25.00"] * 4)
            items = page.locator("#answers li")
            await expect(items).to_have_count(4)
            # the answers' text is shown as text, never as markup
            assert await page.locator("#answers b").count() == 0
            # put the full architecture's answer on top, then submit
            full = page.locator("#answers li", has_text="<b>full</b>")
            for _ in range(3):
                await full.locator("button", has_text="↑").click()
            await expect(items.first).to_contain_text("<b>full</b>")
            await page.locator("#submit").click()
            await expect(page.locator("#count")).to_have_text("1 ranking(s) stored")
            top = page.locator("#ratings tbody tr").first
            await expect(top.locator("td").first).to_have_text("full")
            mu = float(await top.locator("td").nth(1).text_content() or "0")
            assert mu > 25
            await expect(page.locator("#question")).to_have_text("Who runs?")
            assert browser.errors == []
    finally:
        await runner.cleanup()
    kept, _ = read_rankings(tmp_path / "run")
    assert len(kept) == 1 and kept[0].order[0] == "full" and kept[0].rater == "rater"

"""The society measures (Park et al., section 7) on a constructed case with known answers, and
``bottown eval society`` end to end on the three-resident town with the offline brain."""

from __future__ import annotations

import json
from datetime import date, datetime
from pathlib import Path

import pytest
import typer
from sqlmodel import select
from typer.testing import CliRunner

from bot.cli.eval_society import society
from bot.cli.main import app as bottown
from tests.factories import MINITOWN, make_engine
from tests.fakes.brain import ScriptedBrain
from tests.town.experiments.society.test_measures import ISABELLA, KLAUS, MARIA, at, replay
from town.experiments.society.interviews import evaluate
from town.experiments.society.judge import JUDGE_KNOWS, JudgeKnowsInput
from town.experiments.society.report import plot_diffusion, plot_graphs, write_answers
from town.llm.port import OfflineBrain
from town.memory.stream import NewMemory
from town.store.db import Store
from town.store.models import Conversation, Resident
from town.tick.engine import Engine
from town.world.persona import Event, Fact, ScenarioSpec

MAYOR = Fact(
    id="mayor_election",
    resident=ISABELLA,
    phrase="Sam Moore is running for mayor in the local election",
    question="Do you know who is running for mayor?",
    keywords=["Sam"],
)
PARTY = Event(
    id="valentines_party",
    name="Valentine's Day party",
    host=ISABELLA,
    location="Hobbs Cafe",
    date=date(2023, 2, 14),
    start="17:00",
    end="19:00",
    fact="valentines_party",
)


async def mini_engine(store: Store, brain: ScriptedBrain) -> tuple[Engine, ScenarioSpec]:
    """The three-resident town; its scenario with a second fact (the mayor, known to Isabella
    from a seed memory) and the party as an event."""
    engine = await make_engine(store, brain)
    spec = engine.spec
    scenario = spec.scenario.model_copy(
        update={"facts": [*spec.scenario.facts, MAYOR], "events": [PARTY]}
    )
    return engine, scenario


def remember(engine: Engine, name: str, kind: str, text: str, when: datetime) -> None:
    with engine.store.session() as s:
        row = s.exec(select(Resident).where(Resident.name == name)).one()
        assert row.id is not None
        engine.streams(row.id).add(s, [NewMemory(kind, text, 5)], when)
        s.commit()


def script(brain: ScriptedBrain, answers: list[tuple[str, str]]) -> None:
    """Queue (interview answer, judge verdict) pairs in the order the questions are asked."""
    for said, verdict in answers:
        brain.enqueue("interview", {"answer": said})
        brain.enqueue("judge_knows", {"verdict": verdict, "reason": "scripted"})


# The questions go resident by resident (Isabella, Klaus, Maria), each: the party, the mayor,
# then the others in order.
ANSWERS = [
    ("Yes, it's my party at Hobbs Cafe!", "yes"),  # Isabella: party (seeded)
    ("Sam Moore, he told me.", "yes"),  # Isabella: mayor (seeded)
    ("Klaus is a regular.", "yes"),  # Isabella: Klaus
    ("Maria is a friend.", "yes"),  # Isabella: Maria
    ("Isabella's party, yes.", "Yes."),  # Klaus: party (heard of it on Monday)
    ("Sam, I believe.", "yes"),  # Klaus: mayor -- no memory names Sam: hallucinated
    ("Sure, Isabella.", "yes"),  # Klaus: Isabella
    ("Maria, from physics.", "YES - he met her"),  # Klaus: Maria (talked on Monday)
    ("Hmm.", "perhaps?"),  # Maria: party -- unparseable, counts as no
    ("No idea.", "no"),  # Maria: mayor
    ("Of course.", "yes"),  # Maria: Isabella
    ("Yes, Klaus.", "yes"),  # Maria: Klaus
]


async def test_each_measure_on_a_constructed_case(store: Store, tmp_path: Path) -> None:
    brain = ScriptedBrain()
    engine, scenario = await mini_engine(store, brain)
    remember(engine, ISABELLA, "seed", MAYOR.phrase, at(13, 6, 50))
    party_news = "Isabella Rodriguez told Klaus Mueller about her Valentine's Day party"
    remember(engine, KLAUS, "observation", party_news, at(13, 10))
    remember(
        engine, KLAUS, "chat", "Klaus Mueller talked with Maria Lopez about physics", at(13, 11)
    )
    with store.session() as s:  # Maria drops in at the party: counted present, not invited
        s.add(
            Conversation(
                town_id=engine.town_id,
                location="Hobbs Cafe: counter",
                participants=[MARIA, ISABELLA],
                started=at(14, 18),
                ended=at(14, 18, 20),
            )
        )
        s.commit()
    script(brain, ANSWERS)

    result = await evaluate(engine, scenario, town_name="mini", replay=replay())

    assert brain.pending("interview") == 0 and brain.pending("judge_knows") == 0
    assert result.residents == [ISABELLA, KLAUS, MARIA]
    assert len(result.answers) == 12
    # information diffusion: the party 1 -> 2 of 3; the mayor 1 -> 1 (Klaus's yes is invented)
    party, mayor = result.diffusion
    assert (party.start, party.end) == ([ISABELLA], [ISABELLA, KLAUS])
    assert party.start_share == pytest.approx(1 / 3) and party.end_share == pytest.approx(2 / 3)
    assert (mayor.start, mayor.end) == ([ISABELLA], [ISABELLA])
    # density: at the start Klaus's seeds do not name Maria (2 mutual pairs), at the end all 3
    assert result.edges_start == [(ISABELLA, KLAUS), (ISABELLA, MARIA)]
    assert result.density_start == pytest.approx(2 / 3)
    assert result.edges_end == [(ISABELLA, KLAUS), (ISABELLA, MARIA), (KLAUS, MARIA)]
    assert result.density_end == pytest.approx(1.0)
    # hallucinations: 10 yes answers, Klaus's mayor claim has no memory behind it
    assert len(result.yeses) == 10
    assert [(a.resident, a.subject) for a in result.hallucinations] == [(KLAUS, "mayor_election")]
    assert result.hallucination_rate == pytest.approx(0.1)
    # the unparseable judgment counts as no, is counted and named
    assert [(a.resident, a.judge_reply) for a in result.unparseable] == [(MARIA, "perhaps?")]
    assert any("1 judgment(s) could not be read" in p for p in result.problems)
    # attendance: invited = knew of the party (Klaus); present = Klaus, and Maria by conversation
    (came,) = result.attendance
    assert came.invited == [KLAUS] and came.attended == [KLAUS]
    assert came.present == [KLAUS, MARIA]
    # diffusion over time: Isabella from the start, Klaus from Monday 10:00
    assert result.curves["valentines_party"][:2] == [(at(13, 6, 50), 1), (at(13, 10), 2)]
    assert result.curves["mayor_election"][0] == (at(13, 6, 50), 1)

    files = write_answers(result, tmp_path / "out")
    rows = [json.loads(line) for line in files[0].read_text().splitlines()]
    assert len(rows) == 12 and rows[5]["hallucinated"] is True and rows[8]["parsed"] is False
    assert files[1].read_text().startswith("resident,kind,subject,question,answer,verdict")
    summary = json.loads(files[2].read_text())
    assert summary["density"] == {"start": pytest.approx(2 / 3), "end": pytest.approx(1.0)}
    for png in (
        plot_diffusion(result, tmp_path / "d.png"),
        plot_graphs(result, tmp_path / "g.png"),
    ):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def test_a_town_without_facts_still_gets_its_graph(store: Store) -> None:
    brain = ScriptedBrain()
    engine, scenario = await mini_engine(store, brain)
    bare = scenario.model_copy(update={"facts": [], "events": []})
    for said in ("Yes, Klaus.", "Yes, Maria.", "Yes.", "No.", "Yes.", "Yes."):
        brain.enqueue("interview", {"answer": said})
    for verdict in ("yes", "yes", "yes", "no", "yes", "yes"):
        brain.enqueue("judge_knows", {"verdict": verdict})
    result = await evaluate(engine, bare, town_name="mini")
    assert result.diffusion == [] and len(result.answers) == 6
    assert any("has no seeded facts" in p for p in result.problems)
    assert result.edges_end == [(ISABELLA, KLAUS), (ISABELLA, MARIA)]
    assert result.density_end == pytest.approx(2 / 3)


@pytest.mark.parametrize(
    ("answer", "verdict"),
    [
        ("From what I remember: Isabella is planning a party at Hobbs Cafe.", "yes"),
        ("I'm not sure. I don't remember anything about that.", "no"),
        ("I don't know Isabella's plans.", "no"),
        ("I have not heard of it. But Isabella runs Hobbs Cafe.", "yes"),
    ],
)
def test_the_offline_judge(answer: str, verdict: str) -> None:
    inputs = JudgeKnowsInput(
        question="Do you know about a party?",
        answer=answer,
        subject="a party",
        keywords=["Isabella"],
    )
    assert OfflineBrain().answer(JUDGE_KNOWS, inputs).verdict == verdict


runner = CliRunner()


def eval_app() -> typer.Typer:
    app = typer.Typer()
    app.command("society")(society)
    app.command("unused")(lambda: None)  # two commands, so the name is part of the call
    return app


def test_the_command_end_to_end_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BOTTOWN_EMBEDDER", "hash")
    monkeypatch.setenv("COLUMNS", "200")
    sim = runner.invoke(
        bottown, ["simulate", "--town", str(MINITOWN), "--name", "mini", "--days", "0.1"]
    )
    assert sim.exit_code == 0, sim.output
    out = tmp_path / "society"
    done = runner.invoke(
        eval_app(), ["society", "--town", "mini", "--brain", "offline", "--out", str(out)]
    )
    assert done.exit_code == 0, done.output
    assert "network density" in done.output and "0.167 -> 0.74" in done.output
    assert "end: offline brain" in done.output and "paper (gpt-3.5-turbo)" in done.output
    assert "knows valentines_party" in done.output and "4% -> 48%" in done.output
    rows = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert len(rows) == 3 * 1 + 3 * 2
    assert {r["verdict"] for r in rows} <= {"yes", "no"}
    isabella = next(r for r in rows if r["resident"] == ISABELLA and r["kind"] == "fact")
    assert isabella["verdict"] == "yes" and not isabella["hallucinated"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["diffusion"]["valentines_party"]["start"] == [ISABELLA]
    assert summary["density"]["start"] == pytest.approx(2 / 3)
    for png in ("diffusion.png", "relationships.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"

    missing = runner.invoke(eval_app(), ["society", "--town", "atlantis", "--brain", "offline"])
    assert missing.exit_code == 2 and "no town named 'atlantis'" in missing.output
    no_run = runner.invoke(
        eval_app(), ["society", "--town", "mini", "--run", "nowhere.jsonl", "--brain", "offline"]
    )
    assert no_run.exit_code == 2 and "no run file 'nowhere.jsonl'" in no_run.output

"""The believability interviews of Park et al. (section 6): every resident answers the five
categories of questions (``personas/interview_questions.toml``) under each ablation; human
raters rank the conditions' answers to each question; the rankings become TrueSkill ratings.

A condition limits which memory kinds retrieval may see (``town.inputs.query.interview`` with
``kinds``): ``full`` all of them, ``no-reflection`` all but reflections, ``no-planning`` neither
reflections nor plans, ``no-memory`` none. The resident's summary description stays in every
condition (it is who the resident is). The paper's human baseline needs human-written answers
and is shown from the paper only.

A run folder holds ``answers.jsonl`` and ``answers.csv`` (one row per resident, question and
condition) and ``rankings.jsonl`` (one line per ranked question, appended as raters submit, so a
rater who stops halfway keeps what was submitted).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from town.experiments.extra import experiments_extra
from town.experiments.files import columns, write_csv, write_jsonl
from town.inputs.query import interview
from town.store.models import MEMORY_KINDS
from town.tick.engine import Engine

QUESTIONS_FILE = Path(__file__).resolve().parents[2] / "personas" / "interview_questions.toml"
CONDITIONS: dict[str, tuple[str, ...] | None] = {
    "full": None,
    "no-reflection": tuple(k for k in MEMORY_KINDS if k != "reflection"),
    "no-planning": tuple(k for k in MEMORY_KINDS if k not in ("reflection", "plan")),
    "no-memory": (),
}
PAPER_MU: dict[str, float] = {
    "full": 29.89,
    "no-reflection": 26.88,
    "no-planning": 25.64,
    "human": 22.95,
    "no-memory": 21.21,
}
"""The paper's TrueSkill mu per condition (100 raters)."""
ANSWERS = "answers.jsonl"
ANSWERS_CSV = "answers.csv"
RANKINGS = "rankings.jsonl"


class RunError(LookupError):
    """A run folder that does not exist or holds no readable answers."""


@dataclass(frozen=True)
class Question:
    id: str
    category: str
    text: str

    def filled(self, name: str, other: str) -> str:
        return self.text.replace("{name}", name).replace("{other}", other)


@dataclass(frozen=True)
class InterviewAnswer:
    resident: str
    question_id: str
    category: str
    question: str
    condition: str
    answer: str

    @property
    def item(self) -> str:
        """The key of one ranked question: a resident and a question."""
        return f"{self.resident}|{self.question_id}"


@dataclass(frozen=True)
class Ranking:
    item: str
    order: tuple[str, ...]  # conditions, most believable first
    rater: str
    at: str


def load_questions(path: Path = QUESTIONS_FILE) -> list[Question]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"{path}: cannot read the interview questions: {error}") from None
    questions = [
        Question(str(q["id"]), str(q["category"]), str(q["text"]))
        for q in data.get("questions", [])
        if isinstance(q, dict) and {"id", "category", "text"} <= q.keys()
    ]
    if not questions:
        raise ValueError(f"{path}: no [[questions]] with id, category and text")
    return questions


def parse_conditions(text: str) -> list[str]:
    chosen = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in chosen if c not in CONDITIONS]
    if unknown or not chosen:
        raise ValueError(
            f"unknown condition(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(CONDITIONS)}"
        )
    return list(dict.fromkeys(chosen))


async def run_interviews(
    engine: Engine,
    residents: Sequence[str],
    conditions: Sequence[str],
    questions: Sequence[Question],
    progress: Callable[[InterviewAnswer], None] | None = None,
) -> list[InterviewAnswer]:
    """Every resident answers every question under every condition."""
    answers: list[InterviewAnswer] = []
    for i, name in enumerate(residents):
        other = residents[(i + 1) % len(residents)] if len(residents) > 1 else "a neighbour"
        for question in questions:
            text = question.filled(name, other)
            for condition in conditions:
                said = await interview(engine, name, text, kinds=CONDITIONS[condition])
                answer = InterviewAnswer(
                    name, question.id, question.category, text, condition, said
                )
                answers.append(answer)
                if progress:
                    progress(answer)
    return answers


def write_answers(answers: Sequence[InterviewAnswer], folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [asdict(a) for a in answers]
    fields = list(InterviewAnswer.__dataclass_fields__)
    return [
        write_jsonl(folder / ANSWERS, rows),
        write_csv(folder / ANSWERS_CSV, fields, columns(rows, fields)),
    ]


def read_answers(folder: Path) -> list[InterviewAnswer]:
    path = folder / ANSWERS
    if not folder.is_dir():
        raise RunError(f"no run folder {str(folder)!r}: run `bottown eval interview` first")
    if not path.is_file():
        raise RunError(f"{str(folder)!r} has no {ANSWERS}: is it an interview run?")
    answers = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            answers.append(InterviewAnswer(**json.loads(line)))
        except (json.JSONDecodeError, TypeError) as error:
            raise RunError(f"{path}:{number}: unreadable answer: {error}") from None
    if not answers:
        raise RunError(f"{path} holds no answers")
    return answers


def items(answers: Iterable[InterviewAnswer]) -> dict[str, list[InterviewAnswer]]:
    """The answers grouped per ranked question (resident and question), in run order."""
    grouped: dict[str, list[InterviewAnswer]] = {}
    for a in answers:
        grouped.setdefault(a.item, []).append(a)
    return grouped


def append_ranking(folder: Path, item: str, order: Sequence[str], rater: str) -> Ranking:
    ranking = Ranking(item, tuple(order), rater, datetime.now(UTC).isoformat())
    path = folder / RANKINGS
    torn = path.is_file() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
    with path.open("a", encoding="utf-8") as f:
        if torn:  # a line cut short by a crash stays unreadable; the new one starts afresh
            f.write("\n")
        f.write(json.dumps({**asdict(ranking), "order": list(order)}) + "\n")
    return ranking


def read_rankings(folder: Path) -> tuple[list[Ranking], int]:
    """The rankings stored so far, and how many lines could not be read (a torn last line)."""
    path = folder / RANKINGS
    if not path.is_file():
        return [], 0
    found, bad = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            raw = json.loads(line)
            found.append(
                Ranking(str(raw["item"]), tuple(raw["order"]), str(raw["rater"]), str(raw["at"]))
            )
        except (json.JSONDecodeError, KeyError, TypeError):
            bad += 1
    return found, bad


@dataclass(frozen=True)
class Rating:
    condition: str
    mu: float
    sigma: float
    rankings: int
    paper_mu: float | None


def trueskill_table(rankings: Iterable[Ranking], conditions: Sequence[str]) -> list[Rating]:
    """TrueSkill (the library's default environment: mu 25, sigma 25/3, beta 25/6, tau 25/300,
    draw probability 0.1) over the rankings in the order given; each ranking is one free-for-all
    match of its conditions, no ties. Best mu first."""
    with experiments_extra():
        import trueskill  # type: ignore[import-untyped]
    env = trueskill.TrueSkill()
    ratings: dict[str, Any] = {c: env.create_rating() for c in conditions}
    counts = dict.fromkeys(conditions, 0)
    for ranking in rankings:
        order = [c for c in dict.fromkeys(ranking.order) if c in ratings]
        if len(order) < 2:
            continue
        rated = env.rate([(ratings[c],) for c in order], ranks=list(range(len(order))))
        for c, (new,) in zip(order, rated, strict=True):
            ratings[c] = new
            counts[c] += 1
    table = [
        Rating(c, float(r.mu), float(r.sigma), counts[c], PAPER_MU.get(c))
        for c, r in ratings.items()
    ]
    return sorted(table, key=lambda r: -r.mu)


def table_as_data(table: Iterable[Rating]) -> list[Mapping[str, Any]]:
    return [asdict(r) for r in table]

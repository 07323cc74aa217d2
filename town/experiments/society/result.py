"""What a society evaluation found: every answer, the measures, and the paper's figures."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from town.experiments.society.attendance import Attendance
from town.experiments.society.measures import density

PAPER_DIFFUSION: dict[str, tuple[float, float]] = {
    "mayor_election": (0.04, 0.32),
    "valentines_party": (0.04, 0.48),
}
PAPER_DENSITY = (0.167, 0.74)
PAPER_ATTENDANCE = (5, 12)
PAPER_HALLUCINATION_RATE = 0.013
PAPER: dict[str, Any] = {
    "diffusion": PAPER_DIFFUSION,
    "density": PAPER_DENSITY,
    "attendance": PAPER_ATTENDANCE,
    "hallucination_rate": PAPER_HALLUCINATION_RATE,
}
"""The paper's figures (25 agents, 2 game days): mayor 1 -> 8 of 25, party 1 -> 12 of 25,
density 0.167 -> 0.74, 5 of the 12 invited came, 6 of 453 answers (1.3%) hallucinated."""


@dataclass
class Answer:
    """One question to one resident, its answer and the judgment."""

    resident: str
    kind: str  # "fact" or "person"
    subject: str  # a fact id or a resident's name
    question: str
    answer: str = ""
    verdict: str = "no"  # yes or no, as judged ("no" when the judge's reply was unparseable)
    judge_reply: str = ""
    reason: str = ""
    parsed: bool = True
    supported: bool = False
    hallucinated: bool = False
    error: str = ""

    @property
    def yes(self) -> bool:
        return self.verdict == "yes"

    @property
    def knows(self) -> bool:
        return self.yes and not self.hallucinated


@dataclass
class Diffusion:
    fact: str
    question: str
    residents: int
    start: list[str]
    end: list[str]

    @property
    def start_share(self) -> float:
        return len(self.start) / self.residents if self.residents else 0.0

    @property
    def end_share(self) -> float:
        return len(self.end) / self.residents if self.residents else 0.0


@dataclass
class SocietyResult:
    town: str
    residents: list[str]
    answers: list[Answer] = field(default_factory=list)
    diffusion: list[Diffusion] = field(default_factory=list)
    edges_start: list[tuple[str, str]] = field(default_factory=list)
    edges_end: list[tuple[str, str]] = field(default_factory=list)
    attendance: list[Attendance] = field(default_factory=list)
    curves: dict[str, list[tuple[datetime, int]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def density_start(self) -> float:
        return density(len(self.residents), self.edges_start)

    @property
    def density_end(self) -> float:
        return density(len(self.residents), self.edges_end)

    @property
    def yeses(self) -> list[Answer]:
        return [a for a in self.answers if a.yes]

    @property
    def hallucinations(self) -> list[Answer]:
        return [a for a in self.answers if a.hallucinated]

    @property
    def hallucination_rate(self) -> float:
        yeses = len(self.yeses)
        return len(self.hallucinations) / yeses if yeses else 0.0

    @property
    def unparseable(self) -> list[Answer]:
        return [a for a in self.answers if not a.parsed]

    def summary(self) -> dict[str, Any]:
        """The figures as plain data (for JSON)."""
        return {
            "town": self.town,
            "residents": self.residents,
            "diffusion": {
                d.fact: {
                    "question": d.question,
                    "start": d.start,
                    "end": d.end,
                    "start_share": d.start_share,
                    "end_share": d.end_share,
                }
                for d in self.diffusion
            },
            "density": {"start": self.density_start, "end": self.density_end},
            "edges": {
                "start": [list(e) for e in self.edges_start],
                "end": [list(e) for e in self.edges_end],
            },
            "attendance": [
                {**asdict(a), "start": a.start.isoformat(), "end": a.end.isoformat()}
                for a in self.attendance
            ],
            "answers": len(self.answers),
            "yes": len(self.yeses),
            "hallucinated": len(self.hallucinations),
            "hallucination_rate": self.hallucination_rate,
            "unparseable_judgments": len(self.unparseable),
            "curves": {
                fact: [[at.isoformat(), n] for at, n in points]
                for fact, points in self.curves.items()
            },
            "problems": self.problems,
            "paper": PAPER,
        }

"""The town's brain, composed in one place (the chain as drawn in ARCHITECTURE.md, "The LLM
chain"), and the handles kept where it was composed: the report, the budget, the server's pacer
and the model's gateways, which ``status``, the scheduler and the visitor path read. Nothing
finds a part by walking the chain. With no model the brain is the offline brain.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import openai

from town.llm.client import seconds_of
from town.llm.fallback import Fallback
from town.llm.gateway import MODE_LLM, LLMGateway
from town.llm.pacing import Pacer
from town.llm.port import Brain, OfflineBrain
from town.llm.report import AnswerReport, said_together
from town.llm.reported import Reported
from town.llm.usage import Budget, Holds, Unlimited, UsageRecorder, UsageTally

OFFLINE_LABEL = "offline brain (deterministic, no LLM)"
BEGUN_SHARE = 0.3
"""The share of a tick's calls that long thoughts begun in it may take: a resident waking (a
summary in the tick it wakes, a day plan in the next) or reflecting (questions, then insights
at the next tick), two calls each, so about 60% of the server's time in all at most."""


@dataclass
class Handles:
    """The handles of the town's brain as :func:`compose` made it."""

    report: AnswerReport = field(default_factory=AnswerReport)
    budget: Budget = field(default_factory=Unlimited)
    usage: UsageRecorder = field(default_factory=UsageTally)
    pacer: Pacer | None = None  # the server's (None: no model)
    models: tuple[LLMGateway, ...] = ()
    pace_s: float | None = None  # the tick's interval the model's calls keep (keep_pace)

    @property
    def offline(self) -> bool:
        """No model configured: the offline brain thinks."""
        return not self.models

    def keep_pace(self, tick_seconds: float | None) -> None:
        """The tick's interval the model's calls keep (None: always wait for the model)."""
        self.pace_s = tick_seconds
        for model in self.models:
            model.pace_s = tick_seconds

    def server_busy(self) -> bool:
        """Whether the server has every slot taken or calls waiting for one on our side: a
        second resident's answer to words already answered would only add to the next
        visitor's wait."""
        return self.pacer is not None and self.pacer.busy

    def begun_per_tick(self) -> int | None:
        """How many long thoughts (a wake-up, a reflection) may begin in one tick so that the
        town keeps its pace (None: any number, offline or always waiting for the model):
        ``BEGUN_SHARE`` of the calls the server answers in a tick's interval; one before
        anything is measured."""
        if self.pace_s is None or self.pacer is None:
            return None
        calls = self.pacer.calls_in(self.pace_s)
        return 1 if calls is None else max(1, math.floor(BEGUN_SHARE * calls))

    def server_line(self) -> str:
        """What the server does, as it said or as set ("" offline)."""
        pacer = self.pacer
        if pacer is None:
            return ""
        said = "as the server says" if pacer.said_by == "server" else "as set (BOTTOWN_LLM_SLOTS)"
        calls = "1 call" if pacer.slots == 1 else f"{pacer.slots} calls"
        streams = "" if pacer.streams else "; it does not stream, so replies are read whole"
        return f"LLM server: {calls} at once, {said}{streams}"

    def pace_line(self) -> str:
        """The pace the server can keep, in a member's words: how many things it thinks a
        minute, what is made offline at the town's pace, and a tick that would let the model
        think all of it ("" before anything is measured)."""
        pacer, wanted = self.pacer, self.report.wanted_per_tick()
        per_minute = pacer.calls_in(60.0) if pacer is not None else None
        if pacer is None or per_minute is None or not wanted:
            return ""
        line = f"this server thinks about {per_minute:.0f} things a minute"
        needed = wanted * 60.0 / max(per_minute, 1e-3)  # real seconds a tick's calls take
        every = math.ceil(needed / 5) * 5 if needed > 5 else max(1, math.ceil(needed))
        kept = self.report.offline_for_pace()
        if self.pace_s is not None and kept:
            offline = said_together([self.report.in_words(t) for t in kept])
            line += (
                f"; at a tick every {self.pace_s:g} s the residents' {offline} are made offline; "
                f"a tick every {every} s would let the model do all of it"
            )
        else:
            line += f"; a tick every {every} s or more needs no offline answers"
        return line

    def status_lines(self) -> list[str]:
        """For ``status`` and ``simulate``: the server, the pace it keeps, and today's answers
        by who made them."""
        if not self.models:
            return []
        lines = [line for line in (self.server_line(), self.pace_line()) if line]
        return lines + self.report.status_lines()

    def label(self) -> tuple[str, bool]:
        """Who thinks for the residents, and whether the offline brain answers for now: the
        offline brain, or the model and, while it is out of use, why."""
        if not self.models:
            return OFFLINE_LABEL, True
        modes = [(m.name, m.mode) for m in self.models]
        out = [(n, mode) for n, mode in modes if mode != MODE_LLM]
        names = " | ".join(n for n, _ in modes)
        if not out:
            return names, False
        return f"{names} ({out[0][1]})", len(out) == len(modes)


class Servers:
    """One pacer per server (by base URL), shared by every model and town that calls it."""

    def __init__(self) -> None:
        self._pacers: dict[str, Pacer] = {}

    def pacer(self, base_url: str | None, slots: int, timeout_s: float, ceiling: int) -> Pacer:
        key = (base_url or "").rstrip("/")
        found = self._pacers.get(key)
        if found is None:
            found = self._pacers[key] = Pacer(slots, timeout_s, ceiling=ceiling)
        return found


def think_with(
    client: openai.AsyncOpenAI,
    model: str,
    *,
    slots: int = 1,
    ceiling: int = 256,
    cut: bool = True,
    usage: UsageRecorder | None = None,
    budget: Budget | None = None,
    offline: Brain | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    pace_s: float | None = None,
) -> tuple[Brain, Handles]:
    """One model's brain, composed (:func:`compose`), its calls paced to ``slots`` at once
    (until the server says its own; never past ``ceiling``) and held against ``budget``."""
    gateway = LLMGateway(
        client,
        model=model,
        pacer=Pacer(slots, seconds_of(client.timeout), ceiling=ceiling, cut=cut),
        holds=Holds(budget if budget is not None else Unlimited()),
        temperature=temperature,
        max_tokens=max_tokens,
        pace_s=pace_s,
    )
    chosen = offline if offline is not None else OfflineBrain()
    return compose([gateway], offline=chosen, usage=usage, budget=budget)


def compose(
    models: Sequence[LLMGateway],
    *,
    offline: Brain,
    usage: UsageRecorder | None = None,
    budget: Budget | None = None,
    split: Brain | None = None,
) -> tuple[Brain, Handles]:
    """The town's brain and its handles: ``models`` (none: the offline brain alone; two: the
    A/B ``split`` of them) behind the fallback to ``offline`` and the report."""
    handles = Handles(
        budget=budget if budget is not None else Unlimited(),
        usage=usage if usage is not None else UsageTally(),
        pacer=models[0].pacer if models else None,
        models=tuple(models),
    )
    if not models:
        return offline, handles
    model: Brain = split if split is not None else models[0]
    brain = Reported(Fallback(model, offline), handles.report, handles.usage)
    return brain, handles

"""``bottown run``: one town, live, on one or more platforms.

``TownRuntime`` is the town adapters see (``adapters.core.ports.TownPort``): visitors' messages
and commands go in through it; the town's events come out through one ``OutboxPump`` per
adapter. Its ticks are an APScheduler job (``bot/runtime/scheduler.py``), at the pace stored on the
town; time missed while it was down is made up when it starts.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace

from adapters.core.delivery import OutboxPump
from adapters.core.ports import Adapter, Caller, Reply, Thinking
from bot.runtime.commands import Command, Commands, thinking
from bot.runtime.consent import leaving_forgets, replay_paths
from bot.runtime.scheduler import Pace, Timekeeper
from bot.runtime.settings import Settings
from bot.runtime.towns import OpenTown
from bot.runtime.watch import COMMITTED, PAUSED, ROLLED_BACK, Watch
from town.authoring.living import follow_persona
from town.features.consent.forget import follow_forgets, forgets_done
from town.features.ratings.reactions import Reacted, react
from town.inputs import visitor
from town.inputs.limits import VisitorRateLimit
from town.inputs.visit import EmptyWords, Visit
from town.llm import urgency
from town.llm.report import AnswerReport
from town.outbox import audit
from town.store.db import Store
from town.store.usage import DailyTokenBudget, StoredUsage
from town.text import clean_text, name_of
from town.tick.engine import Engine, TickReport, TownChanged
from town.views import card
from town.views.card import ResidentCard, TownMap

log = logging.getLogger(__name__)

PLATFORMS = ("web", "discord", "slack")


@dataclass
class TownRuntime:
    """A running town: the ``TownPort`` every adapter talks to."""

    opened: OpenTown
    settings: Settings
    wake: asyncio.Event = field(default_factory=asyncio.Event)  # the outbox has news
    adapters: list[Adapter] = field(default_factory=list)
    pumps: list[OutboxPump] = field(default_factory=list)  # one per adapter, while it runs
    # What a tick may raise to end the run (a worker's LeaseLost); anything else is logged and
    # the tick rolled back.
    stop_on: tuple[type[BaseException], ...] = ()
    watch: Watch = field(default_factory=Watch)  # the process's: ticks and replies are told it
    commands: Commands = field(init=False)
    keeper: Timekeeper | None = field(default=None, init=False)  # while run_town runs it
    visitor_rate: VisitorRateLimit = field(init=False)  # each visitor's messages a minute
    persona_seen: int = field(init=False)  # the persona revision the engine's town is from
    forgets_seen: int = field(init=False)  # the forget generation the memory arrays are from

    def __post_init__(self) -> None:
        self.commands = Commands(
            self.opened.engine,
            usage=self.opened.usage,
            budget=DailyTokenBudget(
                self.opened.usage,
                self.settings.daily_token_budget,
                limit_calls=self.settings.daily_call_budget,
            ),
            extra_status=self._adapter_status,
            replays=replay_paths(self.settings.data_dir),
            forget_on=leaving_forgets(self.settings.forget_on_leave),
        )
        self.visitor_rate = VisitorRateLimit(self.settings.visitor_messages_per_minute)
        self.persona_seen = self.opened.town.persona_revision
        self.forgets_seen = forgets_done(self.engine)
        for name in ("pause", "resume", "speed"):  # the scheduler follows them at once
            if name in self.commands.table:
                self.commands.table[name] = self._then_follow(self.commands.table[name])

    def _then_follow(self, command: Command) -> Command:
        run = command.run

        async def run_then_follow(caller: Caller, args: list[str]) -> Reply:
            reply = await run(caller, args)
            if reply.ok and self.keeper is not None:
                self.keeper.follow(self.town_id)
            return reply

        return replace(command, run=run_then_follow)

    @property
    def engine(self) -> Engine:
        return self.opened.engine

    def pace(self) -> Pace:
        """The town's stored pace: paused or not, minutes a tick, seconds between ticks."""
        with self.store.session() as session:
            return Pace.of(self.engine.town(session), self.settings)

    @property
    def town_name(self) -> str:
        return self.opened.town.name

    @property
    def usage(self) -> StoredUsage:
        return self.opened.usage

    def platforms(self) -> list[str]:
        """The platforms the town is on in this process (its outbox's deliverers)."""
        return [adapter.name for adapter in self.adapters]

    @property
    def store(self) -> Store:
        return self.opened.services.store

    @property
    def town_id(self) -> int:
        assert self.opened.town.id is not None
        return self.opened.town.id

    def areas(self) -> list[str]:
        return [area.name for area in self.opened.engine.spec.areas]

    async def visitor_says(self, visit: Visit) -> None:
        """The words are stored and heard, and each answer stored, then posted at once by every
        platform (``town.inputs.visitor.say``, ``post_now``; what does not go out then, the
        pumps' rounds deliver). Words empty once cleaned raise ``EmptyWords`` for the
        adapter to tell the visitor; an unknown place is logged."""
        rate: VisitorRateLimit | None = self.visitor_rate  # over it: audited, heard by nobody
        await asyncio.to_thread(self.forgets)  # never recall a member forgotten elsewhere
        area, platform = visit.area, visit.platform
        heard_at, answered = self.watch.clock(), False

        async def post(outbox_ids: list[int]) -> None:  # the first answer's wait, watched
            nonlocal answered
            if outbox_ids and not answered:
                answered = True
                self.watch.replied(self.town_name, platform, self.watch.clock() - heard_at)
            await self.post_now(outbox_ids)

        for attempt in (1, 2):
            try:
                with urgency.person_waiting(urgency.VISITOR):  # its reply goes to the model first
                    result = await visitor.say(
                        self.engine, visit, rate=rate, typing=self._typing, post=post
                    )
            except TownChanged:  # rolled back whole: heard again, and counted once
                if attempt == 2:
                    log.warning(
                        "%s: a %s message in %s was not heard: the town kept changing in "
                        "another process",
                        self.town_name,
                        platform,
                        area,
                    )
                    break
                log.info(
                    "%s: another process changed the town while a %s message in %s was "
                    "heard; hearing it again",
                    self.town_name,
                    platform,
                    area,
                )
                rate = None
                continue
            except EmptyWords:
                raise
            except ValueError as exc:  # an unknown place: nothing to remember
                log.info("ignored a %s message in %s: %s", platform, area, exc)
            else:
                if result.limited:
                    log.debug(
                        "a %s visitor in %s is over the message rate: not heard", platform, area
                    )
            break
        self.wake.set()

    async def reacted(self, reaction: Reacted) -> bool:
        try:
            return await react(self.opened.engine, reaction)
        except ValueError as exc:  # no emoji, no member: nothing to keep
            log.info("ignored a %s reaction: %s", reaction.platform, exc)
        except TownChanged:  # another process changed the town meanwhile: the reaction is lost
            log.warning("%s: a %s reaction was not kept", self.town_name, reaction.platform)
        return False

    async def _typing(self, area: str, author: str) -> None:
        """A resident starts composing an answer to a visitor: every adapter shows it typing
        (best effort: ``Adapter.typing`` never raises)."""
        await asyncio.gather(*(a.typing(area, author) for a in self.adapters))

    async def post_now(self, outbox_ids: list[int]) -> None:
        """Residents' answers to a visitor, stored, posted by every platform at once (ahead of
        the outbox's backlog)."""
        if outbox_ids:
            await asyncio.gather(*(pump.post_now(outbox_ids) for pump in self.pumps))

    async def command(self, caller: Caller, line: str) -> Reply:
        if not caller.is_admin and f"{caller.platform}:{caller.user_id}" in self.settings.admins:
            caller = replace(caller, is_admin=True)
        if not caller.automatic:  # every command line a person typed, before it runs
            await audit.record_command(
                self.opened.engine,
                caller.platform,
                caller.user_id,
                name_of(caller.display_name),
                caller.location or "",
                clean_text(line),
            )
        await asyncio.to_thread(self.forgets)  # an interview recalls nobody forgotten elsewhere
        with urgency.person_waiting(urgency.PERSON):  # its calls go ahead of the town's
            reply = await self.commands.handle(caller, line)
        self.wake.set()  # set, say and whisper change the town
        return reply

    def command_names(self) -> list[str]:
        return list(self.commands.table)

    def thinking(self) -> Thinking:
        found = thinking(self.engine.llm)
        behind = self.clock_behind()
        return replace(found, behind=behind) if behind else found

    def clock_behind_pct(self) -> float | None:
        """How far the clock is behind its pace lately (None: no tick job runs it here)."""
        return self.keeper.clock_behind_pct(self.town_id) if self.keeper is not None else None

    @property
    def report(self) -> AnswerReport:
        """The town's brain's answers by who made them (for /metrics' fallbacks)."""
        return self.engine.llm.report

    def clock_behind(self) -> str:
        """How far the clock is behind its pace lately, and which tasks went offline today to
        keep it ("" while it keeps its pace)."""
        pct = self.clock_behind_pct()
        kept = self.engine.llm.report.offline_for_pace()
        said = f"clock {pct:.0f}% behind its pace" if pct else ""
        if kept:
            words = self.engine.llm.report.in_words
            tasks = ", ".join(f"{words(task)} {n}" for task, n in kept.items())
            told = self.engine.llm.pace_line() or f"made offline to keep the pace: {tasks}"
            said += ("; " if said else "") + told
        return said

    # -- the web page's map and resident cards (issue 32) -------------------------------------

    def forgets(self) -> int:
        """The forget generation; a forget another process ran since the last look has the
        residents' memory arrays read again from the store."""
        self.forgets_seen = follow_forgets(self.engine, self.forgets_seen)
        return self.forgets_seen

    async def member_left(self, platform: str, user_id: str, how: str, name: str = "") -> bool:
        """A member banned, kicked or gone: forgotten as ``forget_on_leave`` says."""
        return await self.commands.consent.member_left(platform, user_id, how, name)

    async def town_map(self) -> TownMap:
        return await card.town_map(self.engine)

    async def resident_card(self, name: str) -> ResidentCard:
        return await card.resident_card(self.engine, name)

    def _adapter_status(self) -> str:
        behind = self.clock_behind()
        lines = [f"Pace: {behind}"] if behind else []
        if self.engine.phase:  # (reads and inputs never wait for it)
            lines.append(f"Tick: {self.engine.phase}")
        return "\n".join([*lines, *(a.status_line() for a in self.adapters)])

    async def tick(self) -> TickReport | None:
        """One tick. A failed tick rolls back whole (the clock does not move) and returns None;
        the next one tries again. What ``stop_on`` names is raised, to end the run. A live update
        of the town's folder from another process (``bottown town update``) is followed first:
        the engine takes the town from the folder (the adapters make a new place's channel when
        it is first posted to). Its outcome and time are told the watch."""
        started = self.watch.clock()
        try:
            self.persona_seen = follow_persona(self.engine, self.persona_seen)
            await asyncio.to_thread(self.forgets)
            report = await self.engine.tick()
        except self.stop_on:
            raise
        except TownChanged:
            log.warning(
                "%s: another process changed the town during a tick; the tick rolled back "
                "(the clock did not move) and runs again",
                self.town_name,
            )
            self.watch.ticked(self.town_name, ROLLED_BACK, self.watch.clock() - started)
            return None
        except Exception:
            log.exception(
                "%s: a tick failed and was rolled back; the clock did not move", self.town_name
            )
            self.watch.ticked(self.town_name, ROLLED_BACK, self.watch.clock() - started)
            return None
        outcome = PAUSED if report.skipped else COMMITTED
        self.watch.ticked(self.town_name, outcome, self.watch.clock() - started)
        if report.events:
            self.wake.set()
        return report

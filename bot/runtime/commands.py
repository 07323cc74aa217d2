"""The chat commands, the same words on every platform (Discord, Slack, the web, the shell).

An adapter turns a slash command or a message into ``Commands.handle(caller, line)`` and posts the
``Reply`` it gets back: publicly, or only to the caller when ``private`` is set. Every command has
a help text; bad input gets a clear reply, never an exception.
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from adapters.core.ports import Caller, Reply, Thinking
from bot.runtime.consent import Consent
from town.authoring import living
from town.features.coaching.feedback import feedback
from town.inputs import admin, query, visitor
from town.llm.chain import Handles
from town.store.usage import DailyTokenBudget, StoredUsage
from town.text import echoed
from town.tick.engine import Engine, TownChanged, until_unchanged
from town.views import places

MINUTES_REALTIME = 1  # realtime: one game minute per tick, one tick per real minute
SECONDS_REALTIME = 60.0


@dataclass(frozen=True)
class Command:
    usage: str
    help: str
    admin: bool
    run: Callable[[Caller, list[str]], Awaitable[Reply]]


@dataclass
class Commands:
    engine: Engine
    usage: StoredUsage | None = None
    budget: DailyTokenBudget | None = None
    extra_status: Callable[[], str] | None = None  # e.g. the adapter's intents
    table: dict[str, Command] = field(default_factory=dict)
    replays: Sequence[Path] = ()  # replay files a forget rewrites
    forget_on: frozenset[str] = frozenset({"ban", "kick"})  # departures that forget a member
    consent: Consent = field(init=False)

    def __post_init__(self) -> None:
        add = self.table.__setitem__
        add(
            "help",
            Command("help [command]", "list the commands, or explain one", False, self._help),
        )
        add(
            "join",
            Command("join [name] [role]", "take a name and a role as a visitor", False, self._join),
        )
        add("look", Command("look", "this place: its objects and who is here", False, self._look))
        add("where", Command("where", "who is where", False, self._where))
        add("time", Command("time", "the town's clock", False, self._time))
        add(
            "interview",
            Command(
                "interview <resident> <question>",
                "ask a resident privately; the town does not change",
                False,
                self._interview,
            ),
        )
        add(
            "feedback",
            Command(
                "feedback [interviewer]",
                "notes on your mock-interview answers, quoting them (in an interview room, or "
                "name the interviewer)",
                False,
                self._feedback,
            ),
        )
        add(
            "whisper",
            Command(
                "whisper <resident> <text>",
                "speak as the resident's inner voice",
                True,
                self._whisper,
            ),
        )
        add(
            "set",
            Command(
                'set "<area: sub-area: object>" <state>',
                "rewrite an object's state in words",
                True,
                self._set,
            ),
        )
        add("pause", Command("pause", "stop the clock", True, self._pause))
        add("resume", Command("resume", "start the clock again", True, self._resume))
        add(
            "speed",
            Command(
                "speed <minutes-per-tick> [seconds-between-ticks] | realtime",
                "how much game time a tick is, and how often ticks come (default: the "
                "deployment's interval); realtime is one game minute each real minute",
                True,
                self._speed,
            ),
        )
        add("status", Command("status", "clock, who is awake, LLM use today", True, self._status))
        add(
            "reload",
            Command(
                "reload",
                "apply the town's edited folder to the living town: new residents move in, new "
                "places open, those left out move away (memories kept)",
                True,
                self._reload,
            ),
        )
        self._add_consent()

    def _add_consent(self) -> None:
        """What members decide the town keeps of them (``bot.runtime.consent``)."""
        self.consent = c = Consent(self.engine, self.replays, self.forget_on)
        add = self.table.__setitem__
        what = "erase what the town keeps of you (asks you to confirm)"
        add("forget-me", Command("forget-me [confirm]", what, False, c.forget_me))
        what = "erase what the town keeps of a member (a name, a mention or platform:id)"
        add("forget", Command("forget <member>", what, True, c.forget_member))
        what = "the residents stop hearing and answering you; only the audit log keeps your words"
        add("mute", Command("mute", what, False, c.mute))
        add("unmute", Command("unmute", "the residents hear you again", False, c.unmute))
        what = (
            "a place's channel: quiet (answers to visitors, no narration), closed (no resident "
            "posts), or open"
        )
        add("channel", Command("channel open|quiet|closed [place]", what, True, c.channel))

    async def handle(self, caller: Caller, line: str) -> Reply:
        """Run one command line such as ``interview Isabella "what is new?"``."""
        try:
            words = shlex.split(line.strip().removeprefix("/"))
        except ValueError as exc:
            return Reply(f"I could not read that: {exc}. Use quotes in pairs.", True, False)
        if not words:
            return await self._help(caller, [])
        name, args = words[0].lower(), words[1:]
        if name == "town" and args:  # "/town look" as well as "look"
            name, args = args[0].lower(), args[1:]
        command = self.table.get(name)
        if command is None:
            return Reply(f"There is no command {echoed(name)!r}. " + self._names(), True, False)
        if command.admin and not caller.is_admin:
            return Reply(f"Only admins may use {name}.", True, False)
        try:  # (overtaken by another process, it rolled back whole: it runs again)
            return await until_unchanged(lambda: command.run(caller, args))
        except TownChanged as exc:  # overtaken every time: nothing was saved
            return Reply(str(exc), True, False)
        except (LookupError, ValueError) as exc:
            message = exc.args[0] if exc.args else str(exc)
            return Reply(f"{message}\nUsage: {command.usage}", True, False)

    def _names(self) -> str:
        return "Commands: " + ", ".join(self.table) + ". Try: help <command>."

    async def _help(self, caller: Caller, args: list[str]) -> Reply:
        if args and args[0].lower() in self.table:
            c = self.table[args[0].lower()]
            return Reply(f"{c.usage}: {c.help}" + (" (admins only)" if c.admin else ""), True)
        lines = [
            f"{c.usage} - {c.help}" for c in self.table.values() if caller.is_admin or not c.admin
        ]
        lines.append(f"The residents are AI personas. Brain: {thinking(self.engine.llm).label}")
        return Reply("\n".join(lines), True)

    async def _reload(self, caller: Caller, args: list[str]) -> Reply:
        if args:
            raise ValueError(
                "reload reads the town's own folder; `bottown town update FOLDER` applies another"
            )
        changes = await living.reload(self.engine, by=caller.display_name, platform=caller.platform)
        lines = changes.lines() or ["nothing to change: the town is as its folder says"]
        return Reply("The town follows its folder:\n" + "\n".join(f"- {x}" for x in lines), True)

    async def _join(self, caller: Caller, args: list[str]) -> Reply:
        name = args[0] if args else caller.display_name
        role = " ".join(args[1:])
        who, what = await visitor.join(self.engine, caller.platform, caller.user_id, name, role)
        suffix = f", {what}" if what else ""
        return Reply(f"Welcome, {who}{suffix}. Residents here will notice what you write.", True)

    async def _look(self, caller: Caller, args: list[str]) -> Reply:
        place = " ".join(args) or caller.location
        if not place:
            raise ValueError("look where? use this in a place's channel, or name a place")
        return Reply(await places.look(self.engine, place), True)

    async def _where(self, caller: Caller, args: list[str]) -> Reply:
        seen = await places.whereabouts(self.engine)
        lines = [f"{seen.clock:%A %H:%M}" + (" (paused)" if seen.paused else "")]
        for area, people in sorted(seen.by_area.items()):
            names = ", ".join(n + ("" if awake else " (asleep)") for n, _, awake in people)
            lines.append(f"{area}: {names}")
        return Reply("\n".join(lines), True)

    async def _time(self, caller: Caller, args: list[str]) -> Reply:
        seen = await places.whereabouts(self.engine)
        state = "paused" if seen.paused else f"{seen.minutes_per_tick} game minutes a tick"
        return Reply(f"It is {seen.clock:%A, %B %d, %H:%M} in town ({state}).", True)

    async def _interview(self, caller: Caller, args: list[str]) -> Reply:
        if len(args) < 2:
            raise ValueError("name a resident and ask a question")
        answer = await query.interview(
            self.engine,
            args[0],
            " ".join(args[1:]),
            caller.display_name,
            platform=caller.platform,
            user_id=caller.user_id,
        )
        return Reply(answer, True)

    async def _feedback(self, caller: Caller, args: list[str]) -> Reply:
        text = await feedback(
            self.engine,
            caller.platform,
            caller.user_id,
            caller.display_name,
            interviewer=" ".join(args),
            location=caller.location or "",
        )
        return Reply(text, True)

    async def _whisper(self, caller: Caller, args: list[str]) -> Reply:
        if len(args) < 2:
            raise ValueError("name a resident and what the inner voice says")
        name = await admin.whisper(
            self.engine,
            args[0],
            " ".join(args[1:]),
            by=caller.display_name,
            platform=caller.platform,
            user_id=caller.user_id,
        )
        return Reply(f"{name} hears an inner voice.", True)

    async def _set(self, caller: Caller, args: list[str]) -> Reply:
        text = " ".join(args)
        if " = " in text:
            target, state = (part.strip() for part in text.split(" = ", 1))
        elif len(args) >= 2:
            target, state = args[0], " ".join(args[1:])
        else:
            raise ValueError("name an object and its new state")
        path = await admin.set_object(
            self.engine,
            target,
            state,
            by=caller.display_name,
            platform=caller.platform,
            user_id=caller.user_id,
        )
        return Reply(
            f"{path} is now {echoed(state)}.", True
        )  # the town's narration says it publicly

    async def _pause(self, caller: Caller, args: list[str]) -> Reply:
        clock = await admin.set_paused(self.engine, True, announce_in=self._area(caller))
        return Reply(f"The clock stops at {clock:%A %H:%M}.", True)

    async def _resume(self, caller: Caller, args: list[str]) -> Reply:
        clock = await admin.set_paused(self.engine, False, announce_in=self._area(caller))
        return Reply(f"The clock runs again from {clock:%A %H:%M}.", True)

    async def _speed(self, caller: Caller, args: list[str]) -> Reply:
        if not 1 <= len(args) <= 2:
            raise ValueError("give minutes per tick (and seconds between ticks), or realtime")
        word = args[0].lower()
        seconds: float | None = None
        if word == "realtime":
            if len(args) > 1:
                raise ValueError("realtime takes no seconds: it is one tick a real minute")
            minutes, seconds = MINUTES_REALTIME, SECONDS_REALTIME
        elif word.isascii() and word.isdigit():  # bounded before it is a number
            most = admin.MAX_MINUTES_PER_TICK
            minutes = int(word) if len(word) <= len(str(most)) else most + 1
            if len(args) > 1:
                try:
                    seconds = float(args[1])
                except ValueError:
                    raise ValueError(f"{echoed(args[1])!r} is not a number of seconds") from None
        else:
            raise ValueError(f"{echoed(args[0])!r} is neither a number of minutes nor realtime")
        minutes, seconds = await admin.set_speed(
            self.engine, minutes, seconds, announce_in=self._area(caller)
        )
        every = (
            "at the default interval"
            if seconds is None
            else f"every {seconds:g} real second{'s' if seconds != 1 else ''}"
        )
        suffix = " (real time)" if word == "realtime" else ""
        return Reply(
            f"A tick is now {minutes} game minute{'s' if minutes != 1 else ''}. "
            f"Ticks come {every}{suffix}.",
            True,
        )

    def _area(self, caller: Caller) -> str:
        """The town's area whose channel the caller wrote in ("" if none: a shell, a DM)."""
        wanted = (caller.location or "").casefold()
        return next((a.name for a in self.engine.spec.areas if a.name.casefold() == wanted), "")

    async def _status(self, caller: Caller, args: list[str]) -> Reply:
        seen = await places.whereabouts(self.engine)
        people = [p for group in seen.by_area.values() for p in group]
        awake = sum(1 for _, _, is_awake in people if is_awake)
        lines = [
            f"Clock: {seen.clock:%A %Y-%m-%d %H:%M}"
            + (" (paused)" if seen.paused else f", {seen.minutes_per_tick} min a tick"),
            f"Residents awake: {awake} of {len(people)}",
            f"Brain: {thinking(self.engine.llm).label}",
        ]
        if self.usage is not None:
            calls, tokens = self.usage.totals_today()
            lines.append(f"LLM today: {calls:,} calls, {tokens:,} tokens")
        budget = self.engine.llm.budget
        if isinstance(budget, DailyTokenBudget):  # the budget the town's LLM calls obey
            lines.append(budget.describe())
        elif self.budget is not None:
            lines.append(self.budget.describe())
        lines.extend(self.engine.llm.status_lines())  # the server, answers by who made them
        lines.extend(line for line in (self.consent.status_line(),) if line)
        extra = self.extra_status() if self.extra_status is not None else ""
        if extra:
            lines.append(extra)
        return Reply("\n".join(lines), True)


def thinking(handles: Handles) -> Thinking:
    """Who thinks for the residents: the offline brain (none configured), or the model and,
    while it is out of use, why (``"llm:gpt-4o-mini (offline (budget spent))"``: the offline
    brain answers meanwhile)."""
    label, offline = handles.label()
    return Thinking(label, offline)

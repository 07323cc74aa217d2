"""The platform-neutral chat commands on the three-resident town."""

from __future__ import annotations

import openai
import pytest
from sqlmodel import col, select

from adapters.core.ports import Caller, Thinking
from bot.runtime.commands import Commands, thinking
from tests.factories import CAFE_PAIR, at_cafe, until
from tests.helpers import overtaking
from town.llm.chain import OFFLINE_LABEL, compose, think_with
from town.llm.port import OfflineBrain
from town.store.db import Store
from town.store.models import AuditEntry, OutboxEvent, PendingInput, Resident, Town, Visitor
from town.store.usage import DailyTokenBudget, StoredUsage
from town.tick.engine import Engine
from town.tick.state import ResidentState

MEMBER = Caller("web", "u1", "Alice", is_admin=False, location="Hobbs Cafe")
ADMIN = Caller("web", "u2", "Ada", is_admin=True, location="Hobbs Cafe")


@pytest.fixture
async def commands(store: Store, engine: Engine) -> Commands:
    await until(engine, at_cafe(store, *CAFE_PAIR))  # 07:30
    usage = StoredUsage(store, engine.town_id)
    return Commands(engine, usage, DailyTokenBudget(usage, 1000))


async def test_help_and_unknown_commands(commands: Commands) -> None:
    commands.engine.brain = OfflineBrain()
    member_help = await commands.handle(MEMBER, "help")
    assert "look" in member_help.text and "whisper" not in member_help.text
    assert member_help.text.endswith(
        "The residents are AI personas. Brain: offline brain (deterministic, no LLM)"
    )
    assert "whisper" in (await commands.handle(ADMIN, "/help")).text
    assert "admins only" in (await commands.handle(MEMBER, "help pause")).text
    unknown = await commands.handle(MEMBER, "dance wildly")
    assert not unknown.ok and "no command 'dance'" in unknown.text and "look" in unknown.text
    pasted = await commands.handle(MEMBER, "x" * 10_000)  # echoed as a short prefix only
    assert not pasted.ok and f"no command '{'x' * 79}…'" in pasted.text
    assert len(pasted.text) < 300
    broken = await commands.handle(MEMBER, 'interview "Isabella')
    assert not broken.ok and "quotes" in broken.text


async def test_look_where_and_time(commands: Commands) -> None:
    look = await commands.handle(MEMBER, "look")
    assert look.private and look.text.startswith("Hobbs Cafe: a small cafe")
    assert "the stove is off" in look.text and "Isabella Rodriguez is" in look.text
    assert "it is open" in look.text
    elsewhere = await commands.handle(MEMBER, "look Mueller home")
    assert "Maria Lopez is asleep" in elsewhere.text
    nowhere = await commands.handle(Caller("web", "u3", "Bob"), "look")
    assert not nowhere.ok and "look where?" in nowhere.text
    where = await commands.handle(MEMBER, "/town where")
    assert "Hobbs Cafe: " in where.text and "Maria Lopez (asleep)" in where.text
    assert "07:30" in (await commands.handle(MEMBER, "time")).text


async def test_admin_commands_are_refused_to_members(commands: Commands) -> None:
    for line in ("pause", "resume", "speed 5", "status", "whisper Klaus hi", "set x y"):
        reply = await commands.handle(MEMBER, line)
        assert not reply.ok and reply.text.startswith("Only admins"), line


async def test_pause_resume_and_speed(commands: Commands) -> None:
    engine = commands.engine
    assert "stops at Monday 07:30" in (await commands.handle(ADMIN, "pause")).text
    assert (await engine.tick()).skipped
    assert "(paused)" in (await commands.handle(MEMBER, "time")).text
    await commands.handle(ADMIN, "resume")
    assert "15 game minutes" in (await commands.handle(ADMIN, "speed 15")).text
    assert "1 game minute." in (await commands.handle(ADMIN, "speed realtime")).text
    bad = await commands.handle(ADMIN, "speed fast")
    assert not bad.ok and "neither a number" in bad.text and "Usage: speed" in bad.text
    # numbers are read with bounds, and what is echoed is cut to about 80 characters
    huge = await commands.handle(ADMIN, "speed " + "9" * 9_990)
    assert not huge.ok and "minutes per tick must be 1 to 1440" in huge.text
    assert "digits" not in huge.text and len(huge.text) < 200
    seconds = await commands.handle(ADMIN, "speed 15 " + "s" * 9_990)
    assert not seconds.ok and len(seconds.text) < 200
    wide = await commands.handle(ADMIN, "speed ²")  # a digit, but not a number of minutes
    assert not wide.ok and "neither a number" in wide.text
    nobody = await commands.handle(ADMIN, "forget " + "n" * 9_990)
    assert "Nobody called" in nobody.text and len(nobody.text) < 200
    for line in (f'set "{"o" * 9_990}" burning', 'set "Hobbs Cafe: kitchen: stove" ' + "b" * 9_990):
        assert len((await commands.handle(ADMIN, line)).text) < 300, line[:20]
    for line in ("interview " + "r" * 9_990 + " hi", "look " + "l" * 9_990, "join " + "j" * 9_990):
        assert len((await commands.handle(ADMIN, line)).text) < 300, line[:20]
    report = await engine.tick()
    assert not report.skipped and report.clock.minute == 31
    with engine.store.session() as s:
        assert s.exec(select(Town)).one().minutes_per_tick == 1  # stored, so a restart keeps it


async def test_interview_whisper_set_and_join(commands: Commands) -> None:
    answer = await commands.handle(MEMBER, 'interview Isabella "Are you an AI?"')
    assert answer.private and "AI" in answer.text
    missing = await commands.handle(MEMBER, "interview Nobody hello")
    assert not missing.ok and "no resident named 'Nobody'" in missing.text
    assert "hears an inner voice" in (await commands.handle(ADMIN, "whisper Klaus go home")).text
    done = await commands.handle(ADMIN, "set Hobbs Cafe: kitchen: stove = burning")
    assert done.text == "Hobbs Cafe: kitchen: stove is now burning."
    quoted = await commands.handle(ADMIN, 'set "Hobbs Cafe: counter: coffee machine" brewing')
    assert quoted.ok
    wrong = await commands.handle(ADMIN, "set Hobbs Cafe: attic: box = open")
    assert not wrong.ok and "no object" in wrong.text
    joined = await commands.handle(MEMBER, 'join Alice "a news reporter"')
    assert joined.text.startswith("Welcome, Alice, a news reporter")
    with commands.engine.store.session() as s:
        visitor = s.exec(select(Visitor)).one()
    assert (visitor.display_name, visitor.role, visitor.platform) == (
        "Alice",
        "a news reporter",
        "web",
    )


async def test_an_admin_command_is_never_overtaken_by_a_tick(
    commands: Commands, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whisper writes nothing a tick writes (it waits as a pending input for the next tick to
    start), so another process's tick never overtakes it: done once, at once."""
    store, times = commands.engine.store, [99]

    def klaus() -> tuple[list[str], list[str], int]:
        with store.session() as s:
            row = s.exec(select(Resident).where(Resident.name == "Klaus Mueller")).one()
            pending = [p.text for p in s.exec(select(PendingInput)).all()]
            whispers = s.exec(select(AuditEntry).where(AuditEntry.kind == "whisper")).all()
            return ResidentState.of(row).inbox, pending, len(whispers)

    monkeypatch.setattr(Engine, "unit", overtaking(times))
    reply = await commands.handle(ADMIN, "whisper Klaus go home")
    assert reply.ok and times == [99]  # nothing to overtake
    assert klaus() == ([], ["go home"], 1)  # heard at the next tick
    await commands.engine.tick()
    assert klaus()[1:] == ([], 1)


async def test_status_shows_clock_brain_and_budget(commands: Commands) -> None:
    commands.engine.brain = OfflineBrain()
    status = await commands.handle(ADMIN, "status")
    assert "Residents awake: 2 of 3" in status.text
    assert "offline brain" in status.text and "Budget left: 1,000" in status.text


class _Spent:
    def __init__(self) -> None:
        self.spent = False

    def exhausted(self) -> bool:
        return self.spent


async def test_who_thinks_is_named_from_the_handles_kept_where_the_brain_was_composed() -> None:
    _brain, offline = compose((), offline=OfflineBrain())
    assert thinking(offline) == Thinking(OFFLINE_LABEL, True)
    budget = _Spent()
    client = openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0)
    _brain, handles = think_with(client, "town-model", budget=budget)
    assert thinking(handles) == Thinking("llm:town-model", False)
    budget.spent = True  # the offline brain answers until the budget is back
    assert thinking(handles) == Thinking("llm:town-model (offline (budget spent))", True)
    await client.close()


async def test_commands_answer_their_caller_and_the_channel_hears_a_change_once(
    commands: Commands, store: Store
) -> None:
    def public_lines() -> list[str]:
        with store.session() as s:
            rows = s.exec(
                select(OutboxEvent).where(col(OutboxEvent.kind).in_(["notice", "object"]))
            )
            return [str(r.payload["text"]) for r in rows]

    replies = [
        await commands.handle(MEMBER, "join Alice a reporter"),
        await commands.handle(ADMIN, "pause"),
        await commands.handle(ADMIN, "pause"),  # no change: no public line
        await commands.handle(ADMIN, "resume"),
        await commands.handle(ADMIN, "speed 15"),
        await commands.handle(ADMIN, "set Hobbs Cafe: kitchen: stove = on fire"),
    ]
    assert all(r.ok and r.private for r in replies), [r.text for r in replies]
    lines = public_lines()
    assert len(lines) == 4 and "stops" in lines[0] and "runs again" in lines[1]
    assert "15 min a tick" in lines[2] and lines[3].startswith("the stove")
    await commands.handle(Caller("cli", "me", "Ada", is_admin=True), "pause")  # no channel
    assert len(public_lines()) == 4

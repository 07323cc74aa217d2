"""Mock interviews in the interview-practice town, sessions that remember the candidate, and the
feedback command.

A visitor speaks in Interview Room A (``inputs.say``), Dana Whitfield interviews; the brain is a
ScriptedBrain over the offline brain, so every thought is recorded and deterministic.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sqlmodel import select

from adapters.core.ports import Caller
from bot.runtime.commands import Commands
from tests.factories import Streams, make_engine, resident, until
from tests.fakes.brain import ScriptedBrain
from town.features.coaching import schemas as s
from town.features.coaching.interviews import Interviews, load_interviews
from town.features.coaching.room import plug_in
from town.inputs.visit import Visit
from town.inputs.visitor import say
from town.store.db import Store
from town.store.models import Memory, Town
from town.tick.engine import Engine
from town.tick.pending import state_with_changes
from town.tick.state import Candidate, ResidentState
from town.world.load import load_town

PRACTICE = "interview-practice"
ROOM = "Interview Room A"
DANA = "Dana Whitfield"
ALICE = "Alice Moreau"
KEY = "web:u1"

THIN = "We used a queue."
STRONG_FOLLOW_UP = (
    "Each payout carries an idempotency key stored with a unique constraint in PostgreSQL, so a "
    "retry finds the row and returns the first result; when I built this at my last job we "
    "replayed 3 days of traffic and found 0 double payments."
)
STRONG_DEBUGGING = (
    "Last year I traced a memory leak in our invoicing worker: for example, I added heap "
    "snapshots every 10 minutes, found a cache that never evicted, and cut memory from 6 GB "
    "to 900 MB within two days of the first alert."
)
STRONG_LEDGER = (
    "I would keep an append-only ledger table where every invoice, payment and refund is a pair "
    "of entries that sum to zero; at my last job we ran a nightly check over 2 million rows "
    "and it caught 3 bugs in the first month."
)
MIDDLING_ON_CALL = (
    "When I was on call last month I was paged at night because the payouts queue stopped, so I "
    "restarted the consumer, wrote "
    "the postmortem with the team and we added an alert on the queue age the week after that."
)


async def practice_town(store: Store, brain: Any = None, streams: Streams | None = None) -> Engine:
    """The interview-practice town, ticked until Dana is awake in her interview room."""
    engine = await make_engine(store, brain, streams, persona=PRACTICE, name="practice")
    plug_in(engine, PRACTICE)
    await until(engine, lambda: dana_in_room(store))
    return engine


def dana_in_room(store: Store) -> bool:
    row = resident(store, DANA)
    return row.location.startswith(ROOM) and ResidentState.of(row).awake


async def speak(engine: Engine, words: str, who: str = ALICE, user: str = "u1") -> str:
    """The candidate says ``words`` in the room; Dana's one reply."""
    result = await say(engine, Visit.of(ROOM, who, words, platform="web", user_id=user))
    replies = [e.text for e in result.replies if e.resident == DANA]
    assert len(replies) == 1, result.replies
    assert replies[0].count("?") <= 1, f"more than one question at a time: {replies[0]}"
    return replies[0]


def record(store: Store, key: str = KEY) -> Candidate:
    return dana_state(store).coaching[key]


def dana_state(store: Store) -> ResidentState:
    """Dana's state as a reader sees it: her row with the room's changes still pending on top
    (taken in at the next tick)."""
    with store.session() as s_:
        return state_with_changes(s_, resident(store, DANA))


def question(store: Store, question_id: str) -> str:
    found = interviews().interviewer(DANA).question(question_id)
    assert found is not None
    return found.text


def interviews(folder: str | Path = PRACTICE) -> Interviews:
    return load_interviews(folder, load_town(folder))


def dana_memories(store: Store, kind: str) -> list[Memory]:
    dana = resident(store, DANA).id
    with store.session() as s_:
        rows = s_.exec(select(Memory).where(Memory.resident_id == dana, Memory.kind == kind))
        return list(rows.all())


async def move_clock(store: Store, minutes: int) -> None:
    from datetime import timedelta

    with store.session() as s_:
        town = s_.exec(select(Town)).one()
        town.clock = town.clock + timedelta(minutes=minutes)
        s_.add(town)


async def first_session(engine: Engine) -> list[str]:
    """Four main questions: a thin answer (followed up), then three full ones."""
    said = [await speak(engine, "Hello, I'm here to practise for the backend role.")]
    for answer in (THIN, STRONG_FOLLOW_UP, STRONG_DEBUGGING, STRONG_LEDGER, MIDDLING_ON_CALL):
        said.append(await speak(engine, answer))
    return said


# -- one session ----------------------------------------------------------------------------


async def test_one_question_at_a_time_a_follow_up_on_a_thin_answer_and_a_closing(
    store: Store,
) -> None:
    engine = await practice_town(store)
    opening, follow_up, second, third, fourth, closing = await first_session(engine)

    assert opening.startswith(f"Hello Alice, I'm {DANA}") and "about 40 minutes" in opening
    assert opening.endswith(question(store, "payout_design"))
    # the thin answer gets the bank's follow-up for that question, and nothing else is asked
    assert "it lacked" in follow_up and follow_up.endswith(
        "What exactly makes a retried payout safe in your design, and how would you prove it "
        "in production?"
    )
    # a full answer to the follow-up: the next question, from a topic not covered yet
    assert second.endswith(question(store, "hardest_bug"))
    assert third.endswith(question(store, "ledger_model"))
    assert fourth.endswith(question(store, "on_call"))
    # four main questions asked: the fourth answer closes the session with what comes next
    assert "That's our time, Alice: 5 answers" in closing
    assert "the one to work on is system design" in closing
    assert "system design interview" in closing  # the persona's next steps
    done = record(store)
    assert done.session is None and done.sessions == 1
    assert done.focus[0] == "system design" and done.asked == [
        "payout_design",
        "hardest_bug",
        "ledger_model",
        "on_call",
    ]
    # the answers are Dana's memories, tied to the visitor's key by the notes
    answers = {n.memory: n for n in done.answers}
    assert len(answers) == 5
    texts = {m.id: m.text for m in dana_memories(store, "chat")}
    assert texts[done.answers[0].memory].endswith(f'"{THIN}"')
    # the review: reflections citing the answers, and a plan for the next session
    reviews = [m for m in dana_memories(store, "reflection") if "review of Alice" in m.text]
    assert {m.id for m in reviews} == set(done.reviews)
    weak = [m for m in reviews if "to work on" in m.text]
    assert (
        weak and weak[0].cites == [done.answers[0].memory] and "“We used a queue”" in weak[0].text
    )
    assert all(set(m.cites) <= set(answers) and m.cites for m in reviews)
    plans = [m for m in dana_memories(store, "plan") if "next mock interview" in m.text]
    assert len(plans) == 1 and "focus on system design" in plans[0].text
    assert done.start_from == done.answers[0].memory
    # while interviewing Dana was busy; the closing frees her for her day plan
    assert dana_state(store).reaction_until == engine_clock(store)


def engine_clock(store: Store) -> str:
    with store.session() as s_:
        return s_.exec(select(Town)).one().clock.isoformat()


async def test_the_session_closes_when_its_time_is_up(store: Store) -> None:
    engine = await practice_town(store)
    await speak(engine, "Good morning!")
    await speak(engine, STRONG_FOLLOW_UP)  # the first answer: on to question two
    assert record(store).session is not None
    await move_clock(store, 41)  # the session lasts 40 game minutes
    closing = await speak(engine, STRONG_DEBUGGING)
    assert closing.startswith("Thanks") and "That's our time, Alice: 2 answers in 4" in closing
    done = record(store)
    assert done.session is None and done.sessions == 1 and len(done.answers) == 2
    assert "?" not in closing  # no new question once time is up


# -- two sessions ---------------------------------------------------------------------------


async def test_the_second_session_builds_on_the_first_and_feedback_quotes_answers(
    store: Store,
) -> None:
    brain = ScriptedBrain()
    engine = await practice_town(store, brain)
    await first_session(engine)
    after_first = record(store)
    planned_focus, weakest = after_first.focus, after_first.start_from

    await move_clock(store, 24 * 60)  # the next day
    await until(engine, lambda: dana_in_room(store), limit=200)
    opening = await speak(engine, "Hi Dana, I'm back for round two.")

    # the opening turn was given the plan, its focus and the earlier answer to build on
    opened = brain.calls("coach_turn")[-1].inputs
    assert isinstance(opened, s.CoachTurnInput)
    assert opened.session == 2 and opened.focus == planned_focus
    assert opened.builds_on is not None and opened.builds_on.id == weakest
    assert opened.builds_on.answer == THIN and opened.plan == after_first.plan
    assert opened.bank[0].topic == planned_focus[0]
    # ... and so the first question of session 2 follows from that plan
    assert f"Last time we agreed to work on {planned_focus[0]}" in opening
    assert "On system design you said “We used a queue”, so let's build on that" in opening
    second_session = record(store).session
    assert second_session is not None and second_session.number == 2
    first_question = second_session.turns[0]
    assert first_question.topic == planned_focus[0]
    assert first_question.question_id not in after_first.asked  # new, on the same topic
    assert opening.endswith(question(store, first_question.question_id))

    await speak(engine, "I sharded the payouts table by carrier.")  # thin again: a follow-up
    commands = Commands(engine)
    reply = await commands.handle(Caller("web", "u1", ALICE, location=ROOM), "feedback")
    assert reply.ok and reply.private, reply.text
    assert reply.text.startswith(f"Feedback from {DANA}")
    # the feedback quotes the candidate's own answers, word for word
    assert "You said “We used a queue" in reply.text
    assert "You said “I would keep an append-only ledger table where every" in reply.text
    assert "I sharded the payouts table by carrier" in reply.text
    # the same from elsewhere, naming the interviewer; nobody else's answers are used
    named = await commands.handle(Caller("web", "u1", ALICE, location="Lobby"), "feedback Dana")
    assert named.ok and "We used a queue" in named.text
    stranger = await commands.handle(Caller("web", "u9", "Bo", location=ROOM), "feedback")
    assert stranger.ok and "no answers of yours yet" in stranger.text


async def test_a_scripted_review_decides_where_the_next_session_starts(store: Store) -> None:
    brain = ScriptedBrain()
    engine = await practice_town(store, brain)
    await speak(engine, "Hello!")
    for answer in (STRONG_FOLLOW_UP, STRONG_DEBUGGING, STRONG_LEDGER):
        await speak(engine, answer)
    leak = record(store).answers[1]
    assert leak.topic == "debugging"
    brain.enqueue(
        "coach_review",
        {
            "strengths": [
                {"text": "Clear ledger design", "cites": [record(store).answers[2].memory]}
            ],
            "weak_spots": [{"text": "No on-call story with numbers", "cites": [leak.memory]}],
            "focus": ["reliability", "debugging"],
            "start_from": leak.memory,
            "plan": "Begin with reliability, then revisit the memory leak story.",
            "closing": "Good work today. Next time: reliability first, then debugging.",
        },
        resident=DANA,
    )
    closing = await speak(engine, MIDDLING_ON_CALL)
    assert closing.endswith("Next time: reliability first, then debugging.")
    assert record(store).focus == ["reliability", "debugging"]
    await move_clock(store, 3 * 60)
    opening = await speak(engine, "Hello Dana, round two please.")
    # on_call was asked in session 1: the other reliability question opens session 2
    assert opening.endswith(question(store, "slo_choice"))
    assert "Last time we agreed to work on reliability and debugging" in opening
    assert "On debugging you said “Last year I traced a memory leak" in opening
    opened = brain.calls("coach_turn")[-1].inputs
    assert isinstance(opened, s.CoachTurnInput)
    assert opened.plan == "Begin with reliability, then revisit the memory leak story."
    assert [q.topic for q in opened.bank[:2]] == ["reliability", "debugging"]


# -- honesty, restarts, guests, bad input ---------------------------------------------------


async def test_asked_sincerely_the_interviewer_says_it_is_an_ai(store: Store) -> None:
    engine = await practice_town(store)
    first = await speak(engine, "Hello!")
    honest = await speak(engine, "Sorry, before I answer: are you an AI or a real person?")
    assert honest.startswith("Yes: I'm an AI character") and "not a person" in honest
    assert honest.endswith(question(store, "payout_design"))  # the question stays on the table
    assert first.endswith(question(store, "payout_design"))
    session = record(store).session
    assert session is not None and [t.answer for t in session.turns] == [""]  # not an answer
    commands = Commands(engine)
    asked = await commands.handle(Caller("web", "u1", ALICE), 'interview Dana "Are you a bot?"')
    assert "AI" in asked.text
    lobby = await say(
        engine, Visit.of("Lobby", ALICE, "Sam, are you an AI?", platform="web", user_id="u1")
    )
    assert any("Yes, I'm an AI character" in e.text for e in lobby.replies), lobby.replies


async def test_a_restart_mid_session_resumes_it(tmp_path: Path) -> None:
    from bot.runtime.settings import load_settings
    from bot.runtime.towns import open_town
    from town.memory.vectors import ChromaIndex

    settings = load_settings(data_dir=tmp_path / "data", embedder="hash", brain="offline")
    ChromaIndex.release_all()
    opened = await open_town(settings, "practice", persona=PRACTICE, create=True)
    store = opened.services.store
    await until(opened.engine, lambda: dana_in_room(store))
    await speak(opened.engine, "Hello, ready when you are.")
    follow_up = await speak(opened.engine, THIN)
    assert follow_up.endswith("how would you prove it in production?")
    opened.services.close()
    ChromaIndex.release_all()

    again = await open_town(settings, "practice")  # a new process would do the same
    try:
        store = again.services.store
        resumed = record(store).session
        assert resumed is not None and resumed.number == 1 and len(resumed.turns) == 2
        next_question = await speak(again.engine, STRONG_FOLLOW_UP)
        assert next_question.endswith(question(store, "hardest_bug"))  # not a new opening
        notes = record(store).answers
        assert [n.topic for n in notes] == ["system design", "system design"]
        feedback = await Commands(again.engine).handle(
            Caller("web", "u1", ALICE, location=ROOM), "feedback"
        )
        assert "We used a queue" in feedback.text
    finally:
        again.services.close()


async def test_one_candidate_at_a_time(store: Store) -> None:
    engine = await practice_town(store)
    await speak(engine, "Hi!")
    busy = await speak(engine, "Hello, is this the backend interview?", who="Bo Chen", user="u2")
    assert re.match(r"I'm in a session with Alice Moreau until 09:\d\d, Bo\.", busy), busy
    assert "web:u2" not in dana_state(store).coaching


async def test_feedback_needs_an_interviewer(store: Store) -> None:
    engine = await practice_town(store)
    commands = Commands(engine)
    lobby = await commands.handle(Caller("web", "u1", ALICE, location="Lobby"), "feedback")
    assert not lobby.ok and "name an interviewer (Dana Whitfield, Priya Raman" in lobby.text
    nobody = await commands.handle(Caller("web", "u1", ALICE), "feedback Zed")
    assert not nobody.ok and "no interviewer named 'Zed'" in nobody.text
    fresh = await commands.handle(Caller("web", "u1", ALICE), "feedback Priya")
    assert fresh.ok and "Interview Room B" in fresh.text and "no answers" in fresh.text
    assert (
        "feedback [interviewer]" in (await commands.handle(Caller("web", "u1", ALICE), "help")).text
    )

"""A visitor's answer is stored before it is posted: a process killed between the store and the
post loses nothing (the restarted pump posts it, once); one killed between the claim and the
platform's answer posts it at most once ("unknown", never sent again)."""

from __future__ import annotations

from sqlmodel import select

from adapters.core.delivery import OutboxPump
from bot.runtime.run import TownRuntime
from tests.factories import CAFE_PAIR, at_cafe, until
from tests.fakes.platform import FakePlatform, Sleeps
from town.inputs.visit import Visit
from town.inputs.visitor import say
from town.store.models import Delivery

HOBBS = "Hobbs Cafe"


async def test_an_answer_stored_but_never_posted_goes_out_once_after_a_restart(
    runtime: TownRuntime,
) -> None:
    engine = runtime.opened.engine
    await until(engine, at_cafe(runtime.store, *CAFE_PAIR))
    # the town stores the answer, then the process dies before posting it
    result = await say(engine, Visit.of(HOBBS, "Alice", "Hi Isabella!", "web", "a1"))
    (reply,) = result.replies
    platform = FakePlatform()
    restarted = OutboxPump(runtime.store, runtime.town_id, platform, sleep=Sleeps())
    assert restarted.recover() == 0
    await restarted.deliver_pending()
    answers = [m for m in platform.sent if m.author == reply.resident and m.text == reply.text]
    assert len(answers) == 1
    assert await restarted.post_now(result.outbox_ids) == 0  # never twice
    assert await restarted.deliver_pending() == 0


async def test_an_answer_whose_post_a_kill_interrupted_is_never_posted_again(
    runtime: TownRuntime,
) -> None:
    engine = runtime.opened.engine
    await until(engine, at_cafe(runtime.store, *CAFE_PAIR))
    result = await say(engine, Visit.of(HOBBS, "Alice", "Hi Isabella!", "web", "a1"))
    dying = OutboxPump(runtime.store, runtime.town_id, FakePlatform(), sleep=Sleeps())
    assert dying._claims.claim(
        result.outbox_ids
    )  # claimed, then killed before the platform answered
    platform = FakePlatform()
    restarted = OutboxPump(runtime.store, runtime.town_id, platform, sleep=Sleeps())
    assert restarted.recover() == 1
    await restarted.post_now(result.outbox_ids)
    await restarted.deliver_pending()
    assert not [m for m in platform.sent if m.author == result.replies[0].resident]
    with runtime.store.session() as s:
        (row,) = s.exec(select(Delivery).where(Delivery.outbox_id == result.outbox_ids[0])).all()
    assert row.status == "unknown"

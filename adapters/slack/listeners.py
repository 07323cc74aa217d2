"""Bolt's listeners, each event handed to the town of the workspace it came from: the one town
of a single workspace (Socket Mode or HTTP), or, for many workspaces on one app
(``adapters.slack.workspaces``), the town of the request's team, and ``/town`` in a workspace
with no town to its desk (founding one)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond

from adapters.slack.confirm import ACTION_ID, Confirmations
from adapters.slack.departures import Departures
from adapters.slack.inbound import Inbound


class Town(Protocol):
    """A workspace's town, as the listeners hand it its events (``SlackAdapter``)."""

    inbound: Inbound
    departures: Departures
    confirmations: Confirmations


TownOf = Callable[[str | None], Town | None]  # the request's team id -> its town
# ``/town`` in a workspace with no town: (ack, the command, respond, the team id)
NoTown = Callable[[AsyncAck, dict[str, Any], AsyncRespond, str], Awaitable[None]]


def listen(app: AsyncApp, town_of: TownOf, no_town: NoTown | None = None) -> None:
    """Register the town's listeners on ``app``; what comes from a workspace with no town is
    acknowledged and dropped (``/town`` there: ``no_town``)."""

    async def message(
        ack: AsyncAck, body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        town = town_of(context.team_id)
        await (town.inbound.on_message(ack, body, event) if town else ack())

    async def mention(
        ack: AsyncAck, body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        town = town_of(context.team_id)
        await (town.inbound.on_mention(ack, body, event) if town else ack())

    async def reaction(
        ack: AsyncAck, body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        town = town_of(context.team_id)
        await (town.inbound.on_reaction(ack, body, event) if town else ack())

    async def command(
        ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond, context: AsyncBoltContext
    ) -> None:
        town = town_of(context.team_id)
        if town is not None:
            await town.inbound.on_command(ack, command, respond)
        elif no_town is not None:
            await no_town(ack, command, respond, str(context.team_id or ""))
        else:
            await ack()

    async def user_change(ack: AsyncAck, event: dict[str, Any], context: AsyncBoltContext) -> None:
        town = town_of(context.team_id)
        await (town.departures.on_user_change(ack, event) if town else ack())

    async def action(
        ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond, context: AsyncBoltContext
    ) -> None:
        town = town_of(context.team_id)
        if town is not None:
            await town.confirmations.on_action(ack, body, respond)
            return
        await ack()
        await respond(text="No town here any more.", response_type="ephemeral")

    app.event("message")(message)
    app.event("app_mention")(mention)
    app.event("reaction_added")(reaction)
    app.event("reaction_removed")(reaction)
    app.command("/town")(command)
    app.event("user_change")(user_change)
    app.action(ACTION_ID)(action)

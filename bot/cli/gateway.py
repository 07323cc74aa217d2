"""``bottown gateway``: Discord's gateway sessions in a process of their own, the towns run
elsewhere (``bot.runtime.gateway``)."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

import typer

from bot.cli.common import (
    CLEAR_ERRORS,
    StartFailed,
    err,
    guarded,
    one_line,
    out,
    settings_and_logging,
)

log = logging.getLogger(__name__)


def gateway(
    shards: Annotated[
        str | None,
        typer.Option(
            help="The shard ids this process holds: ids and ranges, as 0-3 or 0,2,5-7 "
            "(needs --shard-count). Default: every shard Discord recommends.",
        ),
    ] = None,
    shard_count: Annotated[
        int | None,
        typer.Option(help="How many shards the bot has in all, across its gateway processes."),
    ] = None,
) -> None:
    """Hold Discord gateway sessions and store what members do (their words in a town's
    channels, their reactions) as inputs for the towns; run no town here."""
    from adapters.discord.shards import ShardSet
    from bot.runtime.gateway import serve_gateway

    def go() -> None:
        settings = settings_and_logging()
        held = ShardSet.parse(shards, shard_count)

        def ready() -> None:
            out.print(f"gateway: {held} connected; Ctrl-C stops it")

        try:
            asyncio.run(serve_gateway(settings, held, ready=ready))
        except KeyboardInterrupt:
            pass
        except CLEAR_ERRORS:
            raise
        except Exception as exc:  # a bad token, the day's session starts spent
            log.debug("the gateway could not start", exc_info=True)
            raise StartFailed(f"the gateway could not start: {one_line(exc)}") from None
        err.print("gateway stopped")

    guarded(go)

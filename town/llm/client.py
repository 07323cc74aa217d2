"""The openai client every part of bottown uses to reach an OpenAI-compatible server.

One thing differs from the client's defaults: its HTTP connections are spread over a few
connection pools (``SpreadTransport``). On every request it sends and every reply it finishes,
an httpx pool checks each of its idle connections for a dropped socket, at about 17 µs a
connection on this machine. A town asks for its calls in bursts (a tick's twenty or so at once),
so one pool holding all of a burst's connections checked them again for each of the burst's
requests: about 12 ms of the event loop's time per busy tick in ``bench town``. Several smaller
pools check only their own connections.
"""

from __future__ import annotations

import itertools

import httpx2
import openai

POOLS = 8  # connection pools per client


class SpreadTransport(httpx2.AsyncBaseTransport):
    """Sends each request through the next of ``pools`` HTTP transports in turn."""

    def __init__(self, pools: int = POOLS) -> None:
        if pools < 1:
            raise ValueError("pools must be >= 1")
        tls = httpx2.create_ssl_context()  # one for all: each takes ~30 ms to load the CAs
        self.transports = [httpx2.AsyncHTTPTransport(verify=tls) for _ in range(pools)]
        self._next = itertools.cycle(self.transports)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await next(self._next).handle_async_request(request)

    async def aclose(self) -> None:
        for transport in self.transports:
            await transport.aclose()


def open_client(
    base_url: str | None, api_key: str, timeout: float, *, pools: int = POOLS
) -> openai.AsyncOpenAI:
    """An ``openai.AsyncOpenAI`` for ``base_url`` (None: the OpenAI API) with no retries of its
    own (the gateway retries), its connections spread over ``pools`` pools. Close it with
    ``await client.close()``."""
    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key=api_key,
        timeout=timeout,
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(transport=SpreadTransport(pools)),
    )

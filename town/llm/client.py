"""The openai client every part of bottown uses to reach an OpenAI-compatible server.

One thing differs from the client's defaults, its transport. A plain ``http://`` server that no
proxy setting applies to (a local or LAN server) is spoken to by ``PlainHTTPTransport``
(``town/llm/plain_http.py``), at half the event loop's CPU per call. Any other (``https://``,
the OpenAI API, a proxied URL) keeps httpx's transport, its connections spread over a few
connection pools (``SpreadTransport``). On every request it sends and every reply it finishes,
an httpx pool checks each of its idle connections for a dropped socket, at about 17 µs a
connection on this machine. A town asks for its calls in bursts (a tick's twenty or so at once),
so one pool holding all of a burst's connections checked them again for each of the burst's
requests: about 12 ms of the event loop's time per busy tick in ``bench town``. Several smaller
pools check only their own connections.
"""

from __future__ import annotations

import itertools
import urllib.request
from urllib.parse import urlsplit

import httpx2
import openai

from town.llm.plain_http import PlainHTTPTransport

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
    own (the gateway retries) and the transport the URL calls for (see the module's text).
    Close it with ``await client.close()``."""
    transport: httpx2.AsyncBaseTransport
    if base_url is not None and plain_http(base_url):
        transport = PlainHTTPTransport()
    else:
        transport = SpreadTransport(pools)
    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key=api_key,
        timeout=timeout,
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(transport=transport),
    )


def plain_http(url: str) -> bool:
    """An ``http://`` URL that no proxy setting (``HTTP_PROXY``, ``ALL_PROXY``, minus
    ``NO_PROXY``) sends through a proxy."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    proxies = urllib.request.getproxies()
    proxied = "http" in proxies or "all" in proxies
    return not proxied or bool(urllib.request.proxy_bypass(parts.hostname))

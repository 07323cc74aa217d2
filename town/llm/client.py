"""The openai client every part of bottown uses to reach an OpenAI-compatible server.

It is ``openai.AsyncOpenAI`` with the same requests on the wire, built with less of the event
loop's time: a town sends a tick's calls one after another, and the tick lasts until the last
is answered, so each call's CPU delays the calls after it. In ``bench town`` the client took
about 550 µs of the loop's time to build each request (median); ``TownOpenAI`` and
``TownHttpClient`` keep the URLs they parsed and merge headers in one pass, for about 380 µs.

Its transport differs from the client's defaults too. A plain ``http://`` server that no
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
from typing import Any
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


class TownHttpClient(openai.DefaultAsyncHttpxClient):
    """The openai client's own httpx client, with its defaults, building the requests the
    openai client asks for with less work.

    The openai client hands ``build_request`` an absolute URL (one of a few) and its headers as
    a list, and httpx parsed the URL anew every time and merged the headers pairwise. Here a
    parsed URL is kept per URL string and the client's default headers that the request does
    not set are put before the request's own, as httpx orders them. Any request with more to
    it (cookies, query parameters, a form, a relative URL) is built by httpx as ever.
    """

    URLS_KEPT = 64

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._urls: dict[str, httpx2.URL] = {}

    def build_request(
        self,
        method: str,
        url: httpx2.URL | str,
        *,
        content: Any = None,
        data: Any = None,
        files: Any = None,
        json: Any = None,
        params: Any = None,
        headers: Any = None,
        cookies: Any = None,
        timeout: Any = httpx2.USE_CLIENT_DEFAULT,
        extensions: Any = None,
    ) -> httpx2.Request:
        parsed = self._absolute(url) if isinstance(headers, list) else None
        if (
            parsed is None
            or data is not None
            or files is not None
            or json is not None
            or params
            or cookies
            or extensions
            or self.cookies
            or self.params
            or not all(isinstance(key, str) for key, _ in headers)
        ):
            return super().build_request(
                method,
                url,
                content=content,
                data=data,
                files=files,
                json=json,
                params=params,
                headers=headers,
                cookies=cookies,
                timeout=timeout,
                extensions=extensions,
            )
        given = {key.lower() for key, _ in headers}
        merged = [(k, v) for k, v in self.headers.multi_items() if k.lower() not in given]
        merged += headers
        limits = self.timeout if timeout is httpx2.USE_CLIENT_DEFAULT else httpx2.Timeout(timeout)
        extensions = {"timeout": limits.as_dict()}
        return httpx2.Request(
            method, parsed, content=content, headers=merged, extensions=extensions
        )

    def _absolute(self, url: httpx2.URL | str) -> httpx2.URL | None:
        """``url`` parsed (once per URL string) if it is absolute; else None."""
        if not isinstance(url, str):
            return None
        parsed = self._urls.get(url)
        if parsed is None:
            parsed = httpx2.URL(url)
            if parsed.is_relative_url:
                return None
            if len(self._urls) >= self.URLS_KEPT:
                self._urls.clear()
            self._urls[url] = parsed
        return parsed


class TownOpenAI(openai.AsyncOpenAI):
    """``openai.AsyncOpenAI``, joining its base URL and a request's path once per path (the
    client joined them for every request, parsing the path as a URL each time)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._joined: dict[str, tuple[httpx2.URL, httpx2.URL]] = {}

    @property
    def user_agent(self) -> str:
        """As ``openai.AsyncOpenAI`` says it (the client names its class)."""
        return super().user_agent.replace(type(self).__name__, openai.AsyncOpenAI.__name__, 1)

    def _prepare_url(self, url: str) -> httpx2.URL:
        base = self.base_url
        found = self._joined.get(url)
        if found is not None and found[0] is base:
            return found[1]
        joined = super()._prepare_url(url)
        if len(self._joined) >= TownHttpClient.URLS_KEPT:
            self._joined.clear()
        self._joined[url] = (base, joined)
        return joined


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
    return TownOpenAI(
        base_url=base_url,
        api_key=api_key,
        timeout=timeout,
        max_retries=0,
        http_client=TownHttpClient(transport=transport),
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

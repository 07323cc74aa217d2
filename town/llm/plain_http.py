"""HTTP/1.1 over plain TCP for the openai client, at half the event loop's CPU per call.

A town sends a tick's LLM calls one after another from one event loop, and a tick lasts until
its last call is answered; so every millisecond of CPU spent sending a call delays all the calls
after it. Through httpx's default transport (httpcore's connection pool on AnyIO), a call to
a local server costs the loop about 1.2 ms of CPU on the development machine (``bottown bench
client``); about half of it is the pool's bookkeeping, AnyIO's layers and h11's event machine.
This transport speaks HTTP/1.1 on asyncio's streams instead, and keeps idle connections per
host; the openai client and httpx above it are unchanged. It reads what RFC 9112 allows a
server to answer: a status line and headers (1xx answers skipped), then a body framed by
Content-Length, by chunked transfer coding, or by the end of the connection.

It serves ``http://`` base URLs that no proxy setting applies to: the local and LAN servers
(Ollama, vLLM, LM Studio, the fake LLM server) where the calls are many and fast. ``https://``
URLs and proxied ones keep httpx's own transport (``town/llm/client.py`` chooses).

Errors are raised as httpx's, which the openai client turns into ``APIConnectionError`` and
``APITimeoutError`` as it does for its own transport. The read timeout bounds the whole
response; a connection the server closed while idle is noticed and not reused. A server may
also close an idle connection just as a request goes out on it (its keep-alive timeout ran out
meanwhile): when a kept connection ends before a single byte of the response came back, the
request is sent once more on a new connection, as clients of HTTP/1.1 do, instead of failing
over to the gateway's retry and its backoff. A response body is read whole (chat completions
are never streamed here) and at most ``max_body`` bytes long.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import httpx2

log = logging.getLogger(__name__)

MAX_BODY = 64 * 1024 * 1024
MAX_HEADERS = 100
_NO_BODY = {204, 304}
# request headers this transport writes itself (the body is sent whole, nothing is compressed)
_WRITTEN_HERE = {b"content-length", b"transfer-encoding", b"accept-encoding"}


class _BadResponse(Exception):
    """The server's bytes are not an HTTP/1.1 response this transport can read."""


class _Stale(Exception):
    """A kept connection ended before any byte of the response: the server had closed it."""


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def usable(self) -> bool:
        """Not closed by the server while idle (asyncio has read its end of stream)."""
        return not (self.reader.at_eof() or self.writer.is_closing())

    def close(self) -> None:
        self.writer.close()


@dataclass
class _Head:
    version: bytes
    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]

    def values(self, name: bytes) -> list[bytes]:
        return [v for k, v in self.headers if k.lower() == name]


class PlainHTTPTransport(httpx2.AsyncBaseTransport):
    """HTTP/1.1 on plain TCP, one request at a time per connection, idle connections kept per
    host and port (the gateway bounds how many calls are in flight)."""

    def __init__(self, *, max_body: int = MAX_BODY) -> None:
        self.max_body = max_body
        self._idle: dict[tuple[str, int], list[_Connection]] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        if url.scheme != "http":
            raise httpx2.UnsupportedProtocol(f"PlainHTTPTransport serves http://, not {url}")
        timeouts = request.extensions.get("timeout", {})
        key = (url.host, url.port or 80)
        payload = _serialise(request, await request.aread())
        conn = self._checkout(key)
        kept = conn is not None
        if conn is None:
            conn = await self._connect(key, timeouts, request)
        try:
            try:
                response, keep = await self._exchange(conn, request, payload, timeouts, kept)
            except _Stale:
                log.debug("%s:%s closed a kept connection as a request went out: sent again", *key)
                conn.close()
                conn = await self._connect(key, timeouts, request)
                response, keep = await self._exchange(conn, request, payload, timeouts, False)
        except BaseException:
            conn.close()
            raise
        if keep:
            self._idle.setdefault(key, []).append(conn)
        else:
            conn.close()
        return response

    def _checkout(self, key: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if conn.usable():
                return conn
            conn.close()  # closed by the server while idle
        return None

    async def _connect(
        self, key: tuple[str, int], timeouts: dict[str, float | None], request: httpx2.Request
    ) -> _Connection:
        where = f"{key[0]}:{key[1]}"
        try:
            async with asyncio.timeout(timeouts.get("connect")):
                reader, writer = await asyncio.open_connection(*key)
        except TimeoutError:
            raise httpx2.ConnectTimeout(
                f"no connection to {where} in time", request=request
            ) from None
        except OSError as error:
            raise httpx2.ConnectError(f"{where}: {error}", request=request) from error
        return _Connection(reader, writer)

    async def _exchange(
        self,
        conn: _Connection,
        request: httpx2.Request,
        payload: bytes,
        timeouts: dict[str, float | None],
        kept: bool = False,
    ) -> tuple[httpx2.Response, bool]:
        """One request and its response; ``_Stale`` when a ``kept`` connection ended before
        any byte of the response came."""
        try:
            conn.writer.write(payload)
            if conn.writer.transport.get_write_buffer_size():  # (most requests go out at once)
                async with asyncio.timeout(timeouts.get("write")):
                    await conn.writer.drain()
        except TimeoutError:
            raise httpx2.WriteTimeout("the request was not sent in time", request=request) from None
        except OSError as error:
            if kept:
                raise _Stale from error
            raise httpx2.WriteError(str(error), request=request) from error
        try:
            async with asyncio.timeout(timeouts.get("read")):
                try:
                    first = await conn.reader.readuntil(b"\n")
                except (asyncio.IncompleteReadError, ConnectionResetError) as error:
                    if kept and not getattr(error, "partial", b""):
                        raise _Stale from error
                    raise
                head = await _read_head(conn.reader, first)
                body, keep = await self._read_body(conn.reader, head)
        except TimeoutError:
            raise httpx2.ReadTimeout("no complete response in time", request=request) from None
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, _BadResponse) as error:
            reason = "the server closed the connection mid-response"
            if not isinstance(error, asyncio.IncompleteReadError):
                reason = f"a malformed response ({error})"
            raise httpx2.RemoteProtocolError(reason, request=request) from error
        except OSError as error:
            raise httpx2.ReadError(str(error), request=request) from error
        response = httpx2.Response(
            head.status,
            headers=head.headers,
            stream=httpx2.ByteStream(body),
            request=request,
            extensions={"http_version": head.version, "reason_phrase": head.reason},
        )
        return response, keep

    async def _read_body(self, reader: asyncio.StreamReader, head: _Head) -> tuple[bytes, bool]:
        """The body, framed as RFC 9112 section 6.3 says, and whether the connection can carry
        another request."""
        keep = head.version == b"HTTP/1.1" and not any(
            b"close" in v.lower() for v in head.values(b"connection")
        )
        if head.status in _NO_BODY:
            return b"", keep
        codings = b",".join(head.values(b"transfer-encoding")).lower()
        if codings:
            if codings.rsplit(b",", 1)[-1].strip() != b"chunked":
                return await self._until_close(reader), False
            return await self._chunked(reader), keep
        lengths = {v.strip() for v in head.values(b"content-length")}
        if not lengths:
            return await self._until_close(reader), False
        if len(lengths) > 1 or not all(v.isdigit() for v in lengths):
            raise _BadResponse(f"content-length {b', '.join(sorted(lengths)).decode()!r}")
        length = int(lengths.pop())
        if length > self.max_body:
            raise _BadResponse(f"a body of {length} bytes, over {self.max_body}")
        return await reader.readexactly(length), keep

    async def _chunked(self, reader: asyncio.StreamReader) -> bytes:
        parts: list[bytes] = []
        size = 0
        while True:
            line = await reader.readuntil(b"\n")
            try:
                chunk = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _BadResponse(f"chunk size {line[:40]!r}") from None
            if chunk == 0:
                while (await reader.readuntil(b"\n")).strip():  # trailers, up to a blank line
                    pass
                return b"".join(parts)
            size += chunk
            if size > self.max_body:
                raise _BadResponse(f"a body over {self.max_body} bytes")
            parts.append(await reader.readexactly(chunk))
            if (await reader.readuntil(b"\n")).strip():
                raise _BadResponse("no line end after a chunk")

    async def _until_close(self, reader: asyncio.StreamReader) -> bytes:
        body = await reader.read(self.max_body + 1)
        while len(body) <= self.max_body:
            more = await reader.read(self.max_body + 1 - len(body))
            if not more:
                return body
            body += more
        raise _BadResponse(f"a body over {self.max_body} bytes")

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()


def _serialise(request: httpx2.Request, body: bytes) -> bytes:
    """The request's bytes: httpx's headers, but the body's length stated (the body is sent
    whole) and no compression asked for (nothing is left to decode)."""
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), request.url.raw_path)]
    for name, value in request.headers.raw:
        if name.lower() in _WRITTEN_HERE:
            continue
        if b"\r" in name or b"\n" in name or b"\r" in value or b"\n" in value:
            raise httpx2.LocalProtocolError(f"a line break in header {name!r}", request=request)
        lines.append(name + b": " + value)
    if body or request.method in ("POST", "PUT", "PATCH"):
        lines.append(b"content-length: %d" % len(body))
    lines.append(b"accept-encoding: identity")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


async def _read_head(reader: asyncio.StreamReader, line: bytes) -> _Head:
    """The status line (``line``, read already) and headers of the final response (1xx ones
    skipped)."""
    while True:
        version, status, reason = _status(line)
        headers: list[tuple[bytes, bytes]] = []
        while line := (await reader.readuntil(b"\n")).rstrip(b"\r\n"):
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                raise _BadResponse(f"header line {line[:40]!r}")
            headers.append((name, value.strip()))
            if len(headers) > MAX_HEADERS:
                raise _BadResponse(f"over {MAX_HEADERS} headers")
        if status >= 200:
            return _Head(version, status, reason, headers)
        line = await reader.readuntil(b"\n")


def _status(line: bytes) -> tuple[bytes, int, bytes]:
    version, _, rest = line.rstrip(b"\r\n").partition(b" ")
    code, _, reason = rest.partition(b" ")
    if version not in (b"HTTP/1.1", b"HTTP/1.0") or len(code) != 3 or not code.isdigit():
        raise _BadResponse(f"status line {line[:60]!r}")
    return version, int(code), reason

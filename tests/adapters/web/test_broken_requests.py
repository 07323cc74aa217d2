"""Requests a client breaks (a body that stops short, a length no body has): one WARNING line,
a 400 or 413, never a traceback in the log."""

from __future__ import annotations

import asyncio
import logging

import pytest

from adapters.web.server import WebAdapter


async def _raw(web: WebAdapter, head: str, body: bytes, *, hang_up: bool) -> bytes:
    """``head`` and ``body`` sent as they are; the client hangs up after them, or reads the
    answer's status line (the server answers before the body it was promised)."""
    host, port = web.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(head.encode() + b"\r\n" + body)
    await writer.drain()
    if hang_up:
        writer.close()
        await writer.wait_closed()
        return b""
    answer = await reader.readline()
    writer.close()
    return answer


def _head(length: int, port: str) -> str:
    return (
        "POST /api/say HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {length}\r\n"
        "Connection: close\r\n"
    )


@pytest.mark.parametrize("length", [999_999_999, 400])
async def test_a_broken_body_is_one_warning_and_never_a_traceback(
    web: WebAdapter, caplog: pytest.LogCaptureFixture, length: int
) -> None:
    port = web.url.rsplit(":", 1)[1]
    caplog.set_level(logging.INFO)
    body = b'{"area": "Hobbs Cafe", "text": "hel'
    if length > 256 * 1024:  # said to be too long: refused before it is read
        answer = await _raw(web, _head(length, port), body, hang_up=False)
        assert answer.startswith(b"HTTP/1.1 413"), answer
    else:  # the client hangs up mid-body
        await _raw(web, _head(length, port), body, hang_up=True)
        await _until_logged(caplog)
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(records) == 1 and records[0].levelno == logging.WARNING, records
    assert records[0].exc_info is None and "\n" not in records[0].getMessage()


async def _until_logged(caplog: pytest.LogCaptureFixture) -> None:
    for _ in range(200):  # the server's handler runs on the same loop: a few turns of it
        if any(r.levelno >= logging.WARNING for r in caplog.records):
            return
        await asyncio.sleep(0)
    await asyncio.sleep(0.01)

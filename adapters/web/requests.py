"""What the web API accepts: who may call it (loopback hosts, same-origin JSON posts) and the
fields of a request body."""

from __future__ import annotations

import ipaddress
import json
import logging
import re
from collections.abc import MutableMapping
from typing import Any

from aiohttp import ClientPayloadError, web
from aiohttp.http_exceptions import HttpProcessingError

from town.text import NAME_LIMIT, shows_something

MAX_TEXT = 10_000  # characters in a message or a command line (the town keeps fewer)
MAX_BODY = 256 * 1024  # bytes in a request's body
log = logging.getLogger(__name__)
VISITOR_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


class BadInput(Exception):
    """A request the API refuses, with the status and a message for the visitor."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def check_origin(request: web.Request, *, local_only: bool) -> None:
    """Only loopback host names when ``local_only`` (no DNS rebinding); a POST only from this
    page's own origin, and only JSON."""
    host = request.headers.get("Host", "")  # not request.host: no DNS lookup when missing
    if local_only and not is_loopback(host_of(host)):
        raise BadInput(403, "this town answers only on 127.0.0.1 or localhost")
    if request.method != "POST":
        return
    origin = request.headers.get("Origin")
    if origin is not None and origin != f"{request.scheme}://{host}":
        raise BadInput(403, f"requests from {origin} are not accepted")
    if request.content_type != "application/json":
        raise BadInput(415, "send JSON (Content-Type: application/json)")


async def body_of(request: web.Request) -> dict[str, Any]:
    """The request's JSON object. A body said to be longer than ``MAX_BODY`` is refused
    unread (413), and one its client stops sending midway is a 400; each is one WARNING line."""
    said = request.content_length or 0
    if said > MAX_BODY:
        log.warning(
            "web: refused a %s %s of %d bytes (at most %d)",
            request.method,
            request.path,
            said,
            MAX_BODY,
        )
        raise BadInput(413, f"the body is {said} bytes; at most {MAX_BODY}")
    try:
        raw = await request.read()
    except (ConnectionError, HttpProcessingError, ClientPayloadError) as exc:
        log.warning(
            "web: a %s %s broke off before its body ended (%s)",
            request.method,
            request.path,
            type(exc).__name__,
        )
        raise BadInput(400, "the body ended before its Content-Length") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInput(400, f"the body is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BadInput(400, "the body must be a JSON object")
    return data


def text_of(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        raise BadInput(400, f"{key} must be a string")
    if len(value) > MAX_TEXT:
        raise BadInput(413, f"{key} is {len(value)} characters long; at most {MAX_TEXT}")
    if not value.strip():
        raise BadInput(400, f"{key} is empty")
    return value.strip()


def visitor_of(data: dict[str, Any], *, required_name: bool) -> tuple[str, str]:
    visitor = data.get("visitor_id")
    if not isinstance(visitor, str) or not VISITOR_ID.fullmatch(visitor):
        raise BadInput(400, "visitor_id must be 1-64 letters, digits, '-' or '_'")
    name = data.get("name", "")
    if not isinstance(name, str):
        raise BadInput(400, "name must be a string")
    if len(name) > NAME_LIMIT:
        raise BadInput(400, f"a name has at most {NAME_LIMIT} characters")
    if required_name and not shows_something(name):
        raise BadInput(400, "name is empty: say who you are")
    return visitor, name


def host_of(netloc: str) -> str:
    """``[::1]:8765`` -> ``::1``; ``localhost:8765`` -> ``localhost``."""
    if netloc.startswith("["):
        return netloc[1:].split("]", 1)[0]
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


def is_loopback(host: str) -> bool:
    if host.casefold() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_host(host: str) -> str:
    """The host as a browser on this machine would write it."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


class ServerLog(logging.LoggerAdapter[logging.Logger]):
    """The HTTP server's log (aiohttp's ``logger``): a request the parser refuses (a request
    line or header over 8 kB, a malformed line) is answered 400 by aiohttp and logged here as
    one warning line, not an error with a traceback; everything else passes through."""

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        refused = kwargs.get("exc_info")
        if isinstance(refused, HttpProcessingError):
            peer = args[0] if args else "?"
            why = str(refused.message).split(":", 1)[0][:120]
            self.logger.warning("web: refused a malformed request from %s (%s)", peer, why)
            return
        super().log(level, msg, *args, **kwargs)

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        return msg, kwargs


async def listen(
    app: web.Application, host: str, port: int, what: str, **options: Any
) -> tuple[web.AppRunner, str]:
    """Serve ``app`` on ``host:port`` (our log, no access log): the runner and its URL, or an
    ``OSError`` that says ``what`` cannot listen there."""
    runner = web.AppRunner(
        app, access_log=None, logger=ServerLog(logging.getLogger("aiohttp.server")), **options
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as exc:
        await runner.cleanup()
        raise OSError(exc.errno, f"{what} cannot listen on {host}:{port}: {exc}") from exc
    return runner, f"http://{url_host(host)}:{runner.addresses[0][1]}"

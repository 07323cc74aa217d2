"""Slack's answers as the town's errors: 429 with its Retry-After, 5xx and lost connections
transient, everything else permanent."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from adapters.core.ports import DeliveryError

NETWORK_ERRORS = (aiohttp.ClientError, TimeoutError, OSError, SlackClientError)


class ProvisionError(RuntimeError):
    """No channel could be found or made for a location."""


def error_code(exc: SlackApiError) -> str:
    response = exc.response
    with contextlib.suppress(Exception):
        return str(response.get("error", ""))
    return ""


def delivery_error(exc: SlackApiError) -> DeliveryError:
    status, code = _status(exc), error_code(exc)
    if status == 429 or code == "ratelimited":
        return DeliveryError(f"Slack rate limit ({code})", retry_after=_retry_after(exc))
    if status >= 500 or code in ("internal_error", "fatal_error", "service_unavailable"):
        return DeliveryError(f"Slack server error {status} {code}".strip())
    return DeliveryError(f"Slack refused the message: {code or status}", permanent=True)


@contextlib.contextmanager
def as_delivery_errors() -> Iterator[None]:
    try:
        yield
    except SlackApiError as exc:
        raise delivery_error(exc) from exc
    except NETWORK_ERRORS as exc:
        raise DeliveryError(f"Slack could not be reached: {exc!r}") from exc
    except ProvisionError as exc:
        raise DeliveryError(str(exc), permanent=True) from exc


def _status(exc: SlackApiError) -> int:
    response = exc.response
    return int(getattr(response, "status_code", None) or getattr(response, "status", 0) or 0)


def _retry_after(exc: SlackApiError) -> float:
    headers = getattr(exc.response, "headers", None) or {}
    for key, value in headers.items():
        if str(key).lower() == "retry-after":
            with contextlib.suppress(ValueError):
                return max(0.0, float(value))
    return 1.0

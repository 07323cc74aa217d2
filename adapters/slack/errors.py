"""Slack's answers as the town's errors.

- a rate limit (HTTP 429 ``ratelimited``, or HTTP 200 ``rate_limited``): wait its Retry-After;
- a credentials problem (a revoked or invalid token, a deactivated app, a missing scope): no
  message can go out until an admin fixes it, so delivery pauses (``credentials``);
- a server error (5xx, ``internal_error``, ``fatal_error``, ...) or a lost connection: transient,
  and *ambiguous*: the message may have been stored before the failure (``maybe_stored``);
- everything else: permanent for that message.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

from adapters.core.ports import DeliveryError

NETWORK_ERRORS = (aiohttp.ClientError, TimeoutError, OSError, SlackClientError)
RATE_LIMITS = ("ratelimited", "rate_limited")
SERVER_ERRORS = ("internal_error", "fatal_error", "service_unavailable", "request_timeout")
# what to fix for each credentials problem
CREDENTIALS = {
    "invalid_auth": "Slack rejects the bot token: set BOTTOWN_SLACK_BOT_TOKEN (xoxb-...)",
    "not_authed": "no Slack bot token was sent: set BOTTOWN_SLACK_BOT_TOKEN (xoxb-...)",
    "token_revoked": "the Slack bot token was revoked: reinstall the app and set the new "
    "BOTTOWN_SLACK_BOT_TOKEN",
    "token_expired": "the Slack bot token expired: turn off token rotation for the app, "
    "reinstall it and set the new BOTTOWN_SLACK_BOT_TOKEN",
    "account_inactive": "the Slack app was uninstalled or deactivated: reinstall it and set the "
    "new BOTTOWN_SLACK_BOT_TOKEN",
    "no_permission": "the Slack workspace does not let the app do this: ask a workspace admin",
    "ekm_access_denied": "the workspace's key management denies access: ask a workspace admin",
    "team_access_not_granted": "the app has no access to this workspace: reinstall it",
}


class ProvisionError(RuntimeError):
    """No channel could be found or made for a location."""


def error_code(exc: SlackApiError) -> str:
    response = exc.response
    with contextlib.suppress(Exception):
        return str(response.get("error", ""))
    return ""


def delivery_error(exc: SlackApiError) -> DeliveryError:
    status, code = _status(exc), error_code(exc)
    if status == 429 or code in RATE_LIMITS:
        return DeliveryError(f"Slack rate limit ({code})", retry_after=retry_after(exc))
    if code == "missing_scope":
        needed = str(exc.response.get("needed") or "?")
        return DeliveryError(
            f"the Slack app lacks the scope {needed}: add it (manifest.yaml, OAuth & "
            "Permissions), reinstall the app and set the new BOTTOWN_SLACK_BOT_TOKEN",
            credentials=True,
        )
    if code in CREDENTIALS:
        return DeliveryError(f"{CREDENTIALS[code]} ({code})", credentials=True)
    if maybe_stored(exc):
        return DeliveryError(f"Slack server error {status} {code}".strip())
    return DeliveryError(f"Slack refused the message: {code or status}", permanent=True)


def maybe_stored(exc: BaseException) -> bool:
    """Whether a failed post may have been stored all the same: a server error or a lost
    connection after the request went out."""
    if isinstance(exc, SlackApiError):
        return _status(exc) >= 500 or error_code(exc) in SERVER_ERRORS
    return isinstance(exc, NETWORK_ERRORS)


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


def retry_after(exc: SlackApiError) -> float:
    headers = getattr(exc.response, "headers", None) or {}
    for key, value in headers.items():
        if str(key).lower() == "retry-after":
            with contextlib.suppress(ValueError):
                return max(0.0, float(value))
    return 1.0

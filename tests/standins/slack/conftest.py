"""slack_sdk's clients here too reach the fake on loopback, never through a proxy."""

from tests.adapters.slack.conftest import _no_proxies

__all__ = ["_no_proxies"]

"""Slack's text rules: channel names and escaping."""

from __future__ import annotations

from adapters.slack.text import channel_name, escape


def test_channel_names_follow_slacks_rules() -> None:
    assert channel_name("Smallville", "Hobbs Café: counter!") == "smallville-hobbs-cafe-counter"
    assert channel_name("mini", "Mueller home") == "mini-mueller-home"
    long = channel_name("Town", "A very long place name " * 10)
    assert len(long) <= 80 and long == long.lower() and not long.endswith("-")
    assert channel_name("☕", "🍵") == "town"


def test_escape_neutralises_every_mention() -> None:
    text = "Hey <!channel> <!here> <!everyone> <@U123> <!subteam^S1> @here @Channel @everyone & co"
    out = escape(text)
    assert "<" not in out and ">" not in out
    assert "&lt;!channel&gt;" in out and "&lt;@U123&gt;" in out and "&amp; co" in out
    for word in ("here", "Channel", "everyone"):
        assert f"@{word}" not in out and f"@\u200d{word}" in out
    assert escape("write to me@example.com") == "write to me@example.com"

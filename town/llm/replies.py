"""What the gateway reads from a server's answer to a chat completion request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openai.types.chat import ChatCompletion


@dataclass(frozen=True, slots=True)
class Reply:
    """What the gateway reads from a chat completion."""

    content: str
    prompt_tokens: int | None  # the server's counts; None when it gave none
    completion_tokens: int | None
    problem: str | None = None  # why the body is no chat completion (content is then "")
    cached_tokens: int = 0  # prompt tokens the server's prefix cache held (when it says)


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def count(source: object, name: str) -> int | None:
    """A token count named ``name`` of a usage object (None: it has none, or not a count)."""
    return _count(getattr(source, name, None))


def parsed(raw: Any) -> Reply:
    """:func:`read_reply` of a raw response (``with_raw_response``) once parsed."""
    try:
        return read_reply(raw.parse())
    except ValueError:  # the body is not JSON (or not UTF-8)
        return Reply("", None, None, "not JSON")


def read_reply(completion: object) -> Reply:
    """The first choice's text and the usage, or the reason the reply is no chat completion.

    The client builds a :class:`ChatCompletion` from any JSON object without validating it (a
    missing field is None), hands back other JSON as it is and a body that is not JSON as text.
    """
    if not isinstance(completion, ChatCompletion):
        return Reply(
            "", None, None, "not JSON" if isinstance(completion, str) else "not a JSON object"
        )
    usage = completion.usage
    prompt = _count(usage.prompt_tokens) if usage else None
    done = _count(usage.completion_tokens) if usage else None
    if not completion.choices:
        return Reply("", prompt, done, "no choices")
    message = completion.choices[0].message
    if message is None:
        return Reply("", prompt, done, "no message")
    content: object = message.content
    if content is None:
        return Reply("", prompt, done)
    if not isinstance(content, str):
        return Reply("", prompt, done, "the message's content is not text")
    details = usage.prompt_tokens_details if usage else None
    cached = _count(details.cached_tokens) if details else None
    return Reply(content, prompt, done, cached_tokens=cached or 0)


def problem_of(error: ValueError) -> str:
    errors = getattr(error, "errors", None)
    if callable(errors):
        found = [
            f"{'.'.join(str(p) for p in e['loc']) or 'reply'}: {e['msg']}"
            for e in errors(include_url=False, include_input=False)[:5]
        ]
        return "; ".join(found)
    return str(error)[:300]

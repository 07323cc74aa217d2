"""The structured-output modes and how a server's rejection of one is recognised."""

from __future__ import annotations

import httpx2
import openai
import pytest

from town.llm import structured
from town.llm.tasks import EMOJI


def status_error(status: int, message: str) -> openai.APIStatusError:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx2.Response(status, request=request)
    return openai.APIStatusError(message, response=response, body={"error": {"message": message}})


@pytest.mark.parametrize(
    ("status", "message", "rejects"),
    [
        (500, "1 validation error: ('body', 'response_format', 'type')", True),
        (400, "'response_format' of type 'json_schema' is not supported", True),
        (422, "json_schema: unknown field", True),
        (500, "the server had an error", False),
        (503, "response_format busy", False),
        (401, "invalid api key", False),
    ],
)
def test_a_rejection_names_the_response_format(status: int, message: str, rejects: bool) -> None:
    assert structured.rejects_format(status_error(status, message)) is rejects


def test_each_mode_asks_differently() -> None:
    schema = EMOJI.json_schema()
    assert structured.response_format("json_schema", "emoji", schema)["json_schema"] == {
        "name": "emoji",
        "schema": schema,
        "strict": False,
    }
    assert structured.response_format("json_object", "emoji", schema) == {
        "type": "json_object",
        "schema": schema,
    }
    assert structured.response_format("text", "emoji", schema) is openai.omit


def test_outside_json_schema_mode_the_prompt_holds_the_schema() -> None:
    messages = EMOJI.render(EMOJI.input_model(action="baking bread"))
    schema = EMOJI.json_schema()
    assert structured.wire(messages, "json_schema", schema) == messages
    for kind in ("json_object", "text"):
        system = structured.wire(messages, kind, schema)[0]
        assert system["role"] == "system"
        assert '"maxLength":16' in str(system.get("content"))


def test_what_the_server_said_fits_one_line() -> None:
    error = status_error(500, "Error code: 500 - 1 validation error:\n  bad 'response_format'")
    assert structured.said(error) == "1 validation error: bad 'response_format'"

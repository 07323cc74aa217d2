"""``bottown llm check``: one small request to the configured LLM, and a plain verdict."""

from __future__ import annotations

from typing import Any

import openai

from bot.runtime.settings import Settings
from town.llm.client import open_client
from town.llm.schemas import EmojiInput
from town.llm.tasks import EMOJI


async def check_llm(settings: Settings) -> tuple[bool, str]:
    """(works, message). The message names the setting to fix; it never contains the key."""
    where = settings.llm_base_url or "the OpenAI API"
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "not-needed"
    client = open_client(settings.llm_base_url, key, settings.llm_timeout_s, max_retries=0)
    inputs = EmojiInput(action="opening Hobbs Cafe for the day")
    schema = {"name": EMOJI.name, "schema": EMOJI.json_schema(), "strict": False}
    create: Any = client.chat.completions.create  # the messages are our own typed dicts
    try:
        reply = await create(
            model=settings.llm_model,
            messages=list(EMOJI.render(inputs)),
            response_format={"type": "json_schema", "json_schema": schema},
            max_tokens=60,
        )
    except openai.AuthenticationError:
        return False, f"{where} rejected the API key (401): check BOTTOWN_LLM_API_KEY"
    except openai.PermissionDeniedError:
        return False, f"{where} refused access (403): may this key use {settings.llm_model}?"
    except openai.NotFoundError:
        return False, (
            f"{where} has no model {settings.llm_model!r} (404): check BOTTOWN_LLM_MODEL "
            "(for Ollama: `ollama pull <model>` first) and that the URL ends in /v1"
        )
    except openai.RateLimitError:
        return False, f"{where} is rate-limiting this key or its quota is spent (429)"
    except openai.APITimeoutError:
        return False, f"{where} did not answer within {settings.llm_timeout_s:g} s"
    except openai.APIConnectionError:
        return False, f"cannot reach {where}: is the server running? check BOTTOWN_LLM_BASE_URL"
    except openai.APIStatusError as exc:
        return False, f"{where} answered HTTP {exc.status_code}: {exc.message[:200]}"
    finally:
        await client.close()
    usage = reply.usage.total_tokens if reply.usage else "?"
    content = reply.choices[0].message.content or "" if reply.choices else ""
    try:
        EMOJI.parse(inputs, content)
    except ValueError:
        return True, (
            f"LLM reachable: {settings.llm_model} at {where} answered ({usage} tokens), but not "
            "with the JSON asked for; the gateway will repair or fall back to the offline brain"
        )
    return (
        True,
        f"LLM OK: {settings.llm_model} at {where} answered with valid JSON ({usage} tokens)",
    )

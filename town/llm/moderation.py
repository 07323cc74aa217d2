"""An OpenAI-compatible ``/moderations`` endpoint, one of the checks output moderation runs
(``town.outbox.moderation``) on what residents say before it can enter the outbox."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import openai

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    flagged: bool
    category: str = ""


PASSED = Verdict(False)


class ModerationEndpoint:
    """An OpenAI-compatible ``/moderations`` endpoint through the ``openai`` client. An error
    (unreachable, a bad key) counts as flagged ("unchecked"): nothing unchecked is posted."""

    def __init__(self, url: str, api_key: str = "", *, model: str | None = None) -> None:
        base = url.rstrip("/").removesuffix("/moderations")
        self.client = openai.AsyncOpenAI(base_url=base, api_key=api_key or "none", max_retries=2)
        self.model = model

    async def __call__(self, text: str) -> Verdict:
        try:
            kwargs: dict[str, Any] = {"model": self.model} if self.model else {}
            reply = await self.client.moderations.create(input=text, **kwargs)
        except openai.OpenAIError as error:
            log.warning("the moderation endpoint failed (%s): the offline line is posted", error)
            return Verdict(True, "unchecked")
        for result in reply.results:
            if result.flagged:
                hit = result.categories.model_dump(by_alias=True)
                return Verdict(True, next((c for c, on in hit.items() if on), "flagged"))
        return PASSED

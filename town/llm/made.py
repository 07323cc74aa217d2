"""Who made an answer: the model (its name), or the offline brain and why (:class:`Unusable`).

The gateway stamps the model's name, the fallback ``offline (<reason>)``, the offline brain
``offline``; the stamp travels with the result to what the town keeps of it (outbox rows,
reactions, replays), so no offline line is ever credited to a model.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

OFFLINE = "offline"
_KEY = "_bottown_made_by"  # kept beside the fields: never dumped, never compared

BUDGET, TIMEOUT, UNPARSEABLE, NO_REPLY = "budget", "timeout", "unparseable", "no reply"
PACE = "pace"
"""Reasons for a fallback (``pace``: answered offline so the town keeps its pace; others:
``HTTP <status>``, ``API key rejected``, ``model missing``, ``error``)."""

R = TypeVar("R", bound=BaseModel)


class Unusable(Exception):
    """The model gave no usable answer: the offline brain answers instead."""

    def __init__(self, detail: str, reason: str = "error", quiet: bool = False) -> None:
        super().__init__(detail)
        self.reason = reason  # the fallback's reason in the report
        self.quiet = quiet  # the log has said why already: this fallback is logged at INFO


def offline(reason: str | None = None) -> str:
    """The offline brain's stamp, with the reason it answered instead of the model."""
    return f"{OFFLINE} ({reason})" if reason else OFFLINE


def stamp(result: R, who: str) -> R:
    """``result``, stamped as made by ``who`` (a model's name, or :func:`offline`'s)."""
    object.__setattr__(result, _KEY, who)  # (results are frozen values: the stamp is beside)
    return result


def made_by(result: BaseModel) -> str:
    """Who made ``result`` ("" when nobody said: a test's scripted answer)."""
    who = result.__dict__.get(_KEY, "")
    return who if isinstance(who, str) else ""


def by_model(who: str) -> bool:
    """Whether a stamp names a model (not the offline brain, not nobody)."""
    return bool(who) and not who.startswith(OFFLINE)


def reason_of(who: str) -> str:
    """The reason in an offline stamp (``"offline (pace)"`` -> ``"pace"``)."""
    return who.removeprefix(OFFLINE).strip(" ()") or "offline"

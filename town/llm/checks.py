"""Checks of a result against its inputs, run after schema validation.

A check returns the (possibly tidied) result, or raises ``ValueError`` so the gateway asks the
model to repair its reply.
"""

from __future__ import annotations

from town.llm import schemas as s


def importance_count(
    inputs: s.RateImportanceInput, result: s.RateImportanceResult
) -> s.RateImportanceResult:
    if len(result.scores) != len(inputs.observations):
        raise ValueError(
            f"expected {len(inputs.observations)} scores (one per observation), "
            f"got {len(result.scores)}"
        )
    return result


def minutes(clock: str) -> int:
    hours, mins = clock.split(":")
    return int(hours) * 60 + int(mins)


def clock(total_minutes: int) -> str:
    total = total_minutes % (24 * 60)
    return f"{total // 60:02d}:{total % 60:02d}"


def within_chunk(inputs: s.DecomposeInput, result: s.DecomposeResult) -> s.DecomposeResult:
    """Keep the items that start inside the chunk being decomposed."""
    start = minutes(inputs.chunk.start)
    kept = [
        item
        for item in result.items
        if (minutes(item.start) - start) % (24 * 60) < inputs.chunk.duration_min
    ]
    if not kept:
        raise ValueError(
            f"no item starts within the chunk ({inputs.chunk.start} for "
            f"{inputs.chunk.duration_min} min)"
        )
    return s.DecomposeResult(items=kept)


def _parts(text: str) -> list[str]:
    return [part.strip() for part in text.split(":") if part.strip()]


def known_path(
    inputs: s.ChooseLocationInput, result: s.ChooseLocationResult
) -> s.ChooseLocationResult:
    """The path must lead along a known place; it is returned in the tree's own spelling."""
    asked = [part for element in result.path for part in _parts(element)]
    if not inputs.tree:
        if not asked:
            raise ValueError("the path is empty")
        return s.ChooseLocationResult(path=asked)
    wanted = [part.casefold() for part in asked]
    for entry in inputs.tree:
        known = _parts(entry)
        if wanted and [part.casefold() for part in known[: len(wanted)]] == wanted:
            return s.ChooseLocationResult(path=known[: len(wanted)])
    raise ValueError(
        "the path must follow one of the known places, e.g. " + repr(_parts(inputs.tree[0]))
    )


def present_named(inputs: s.ReactInput, name: str | None) -> str | None:
    """The one present whom ``name`` names (in its own spelling, whatever the case), or None."""
    wanted = (name or "").strip().casefold()
    return next((p for p in inputs.present if wanted and p.casefold() == wanted), None)


def react_talk_to(inputs: s.ReactInput, result: s.ReactResult) -> s.ReactResult:
    """Talk only to someone present, and only when reacting."""
    talk_to = present_named(inputs, result.talk_to) if result.react else None
    return s.ReactResult(react=result.react, reaction=result.reaction.strip(), talk_to=talk_to)


def three_questions(
    inputs: s.ReflectQuestionsInput, result: s.ReflectQuestionsResult
) -> s.ReflectQuestionsResult:
    questions = [q.strip() for q in result.questions if q.strip()]
    if not questions:
        raise ValueError("no question given")
    return s.ReflectQuestionsResult(questions=questions[:3])


def known_cites(
    inputs: s.ReflectInsightsInput, result: s.ReflectInsightsResult
) -> s.ReflectInsightsResult:
    """Drop cites of statements that were not in the input."""
    ids = {statement.id for group in inputs.questions for statement in group.statements}
    insights = [
        insight.model_copy(update={"cites": [c for c in dict.fromkeys(insight.cites) if c in ids]})
        for insight in result.insights
    ]
    return s.ReflectInsightsResult(insights=insights)

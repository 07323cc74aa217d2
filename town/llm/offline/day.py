"""Offline thinking about the day: planning, decomposing plans, choosing where to go."""

from __future__ import annotations

import itertools
import math
import random
import re

from town.llm import schemas as s
from town.llm.offline.events import with_event
from town.llm.offline.hearing import Hearing
from town.llm.offline.lexicon import HOME_ACTIVITY, HOME_ONLY, HOME_WORDS, PLACE_HINTS
from town.llm.offline.meals import AFTER_A_MEAL, MEAL_MIN, fitting, meal_in
from town.llm.offline.steps import FIRST_OF_MANY, action_steps, gerund, plain
from town.llm.offline.text import (
    content_words,
    emoji_for,
    first_name,
    stable_rng,
    stem,
    stems,
    words,
)
from town.llm.schemas import clock, minutes

DAY = 24 * 60
_TIME = re.compile(
    r"\b([01]?\d|2[0-3])[:.h]([0-5]\d)(?:\s*([ap])\.?m\b\.?)?|\b(1[0-2]|0?\d)\s*([ap])\.?m\.?\b",
    re.I,
)
# The default day: (description, earliest start in minutes of the day, shortest duration, where).
_DEFAULT_DAY = (
    ("waking up and getting ready", None, 30, "home"),
    ("having breakfast", None, 30, "home"),
    ("working at {work}", None, 60, "work"),
    ("having lunch", 12 * 60, 60, "work"),
    ("working at {work}", None, 60, "work"),
    ("having dinner", 18 * 60, 60, "home"),
    ("relaxing at home", None, 60, "home"),
    ("sleeping", 22 * 60, 60, "home"),
)


def _is_home(place: str, resident: str) -> bool:
    found = set(words(place))
    return bool(found & HOME_WORDS) or bool(found & set(words(resident)))


def home_and_work(resident: str, places: list[str]) -> tuple[str, str]:
    homes = [p for p in places if _is_home(p, resident)]
    others = [p for p in places if p not in homes]
    home = homes[0] if homes else (places[-1] if places else "home")
    work = others[0] if others else (places[0] if places else home)
    return home, work


def _default_day(inputs: s.PlanDayInput) -> s.PlanDayResult:
    home, work = home_and_work(inputs.resident, inputs.places)
    wake = minutes(inputs.wake_time)
    starts = [wake]
    for previous, (_text, earliest, _shortest, _where) in itertools.pairwise(_DEFAULT_DAY):
        start = starts[-1] + previous[2]
        if earliest is not None and earliest > wake:
            start = max(start, earliest)
        starts.append(start)
    ends = [*starts[1:], wake + DAY]
    chunks = [
        s.PlanItem(
            start=clock(start),
            duration_min=end - start,
            location=home if where == "home" else work,
            description=description.format(work=work),
        )
        for (description, _e, _d, where), start, end in zip(_DEFAULT_DAY, starts, ends, strict=True)
    ]
    return s.PlanDayResult(chunks=chunks)


def _routine_time(text: str) -> tuple[int | None, str]:
    match = _TIME.search(text)
    if not match:
        return None, text
    if match.group(1) is not None:
        hour, half = int(match.group(1)), (match.group(3) or "").lower()
        if half and hour <= 12:  # "1:30 pm", "12:15 am"
            hour = hour % 12 + (12 if half == "p" else 0)
        at = hour * 60 + int(match.group(2))
    else:
        at = int(match.group(4)) % 12 * 60 + (12 * 60 if match.group(5).lower() == "p" else 0)
    before = re.sub(r"\b(?:at|from|around|by)\s*$", "", text[: match.start()], flags=re.I)
    rest = " ".join(f"{before} {text[match.end() :]}".split()).strip(" -:,;")
    rest = re.sub(r"^(?:at|from)\s+|\s+(?:at|from)$", "", rest, flags=re.I)
    return at, re.sub(r"\s+([,;.])", r"\1", rest)  # "get up , wash" -> "get up, wash"


def _place_in(text: str, places: list[str]) -> str | None:
    lowered = text.lower()
    for place in places:
        names = [place, place.split(":")[0]]
        if any(name.strip().lower() in lowered for name in names if name.strip()):
            return place
    return None


def _spread(times: list[int | None]) -> list[int]:
    """Fill unknown start times evenly between known ones (minutes after waking)."""
    known = [t if t is not None else -1 for t in times]
    known[0] = 0
    if known[-1] < 0:
        known[-1] = max(16 * 60, max(known) + 60)
    filled: list[int] = []
    for index, value in enumerate(known):
        if value >= 0:
            filled.append(value)
            continue
        nxt = next(j for j in range(index + 1, len(known)) if known[j] >= 0)
        prev = filled[-1]
        step = (known[nxt] - prev) / (nxt - index + 1)
        filled.append(prev + max(5, round(step / 5) * 5))
    for index in range(1, len(filled)):
        latest = DAY - 5 * (len(filled) - index)
        filled[index] = min(max(filled[index], filled[index - 1] + 5), latest)
    return filled


def _routine_day(inputs: s.PlanDayInput) -> s.PlanDayResult:
    home, work = home_and_work(inputs.resident, inputs.places)
    wake = minutes(inputs.wake_time)
    entries: list[tuple[int | None, str, str]] = []
    for line in inputs.routine[:12]:
        at, rest = _routine_time(line)
        if not rest.strip():
            continue
        homely = bool(set(words(rest)) & HOME_ACTIVITY)
        place = _place_in(rest, inputs.places) or (home if homely else work)
        entries.append((None if at is None else (at - wake) % DAY, gerund(rest), place))
    if not entries or entries[0][0] not in (None, 0):
        entries.insert(0, (0, "waking up and getting ready", home))
    if not {"sleep", "sleeping", "bed"} & set(words(entries[-1][1])):
        entries.append((None, "sleeping", home))
    if len(entries) > 8:
        entries = [*entries[:7], entries[-1]]
    times: list[int | None] = []
    for at, _text, _place in entries:
        ordered = at is not None and all(t is None or t < at for t in times)
        times.append(at if ordered else None)
    starts = _spread(times)
    items = [(start, text, place) for start, (_a, text, place) in zip(starts, entries, strict=True)]
    while len(items) < 5:
        ends = [item[0] for item in items[1:]] + [DAY]
        longest = max(range(len(items)), key=lambda i: ends[i] - items[i][0])
        start, text, place = items[longest]
        middle = start + max(5, (ends[longest] - start) // 10 * 5)
        items.insert(
            longest + 1, (middle, text if text.startswith("still ") else f"still {text}", place)
        )
    items = _meals_in_time(items, wake)
    ends = [item[0] for item in items[1:]] + [DAY]
    return s.PlanDayResult(
        chunks=[
            s.PlanItem(
                start=clock(wake + start),
                duration_min=end - start,
                location=place,
                description=text,
            )
            for (start, text, place), end in zip(items, ends, strict=True)
        ]
    )


_MEALS = {"breakfast": (7 * 60, 10 * 60), "lunch": (12 * 60, 14 * 60), "dinner": (18 * 60, 20 * 60)}


def _meals_in_time(items: list[tuple[int, str, str]], wake: int) -> list[tuple[int, str, str]]:
    """Meals at meal times (moved into their hours when the neighbours allow) and an hour long
    at most (the next chunk starts earlier); times are minutes after waking."""
    out = list(items)
    for index, (start, text, place) in enumerate(out):
        meal = next((m for m in _MEALS if m in words(text)), None)
        if meal is None or index == 0:
            continue
        low, high = ((t - wake) % DAY for t in _MEALS[meal])
        if low > high:  # (woken after that meal's hours)
            continue
        before = out[index - 1][0]
        after = out[index + 1][0] if index + 1 < len(out) else DAY
        moved = min(max(start, low, before + 5), high, after - 5)
        out[index] = (moved if before < moved < after else start, text, place)
        if index + 1 < len(out) and after - out[index][0] > MEAL_MIN:
            out[index + 1] = (out[index][0] + MEAL_MIN, *out[index + 1][1:])
    return out


def plan_day(inputs: s.PlanDayInput, hearing: Hearing) -> s.PlanDayResult:
    planned = _routine_day(inputs) if inputs.routine else _default_day(inputs)
    chunks = with_event(inputs, planned.chunks)
    return s.PlanDayResult(
        chunks=[
            c.model_copy(update={"description": fitting(c.description, minutes(c.start))})
            for c in chunks
        ]
    )


def _action_lengths(total: int, rng: random.Random) -> list[int]:
    if total < 10:
        return [total]
    units, rest = divmod(total, 10)  # 10 or 20 minutes: on the ticks of a 10-minute town
    parts: list[int] = []
    while units > 0:
        take = min(units, rng.choice((1, 2)))
        parts.append(take * 10)
        units -= take
    parts[-1] += rest
    return parts


def decompose(inputs: s.DecomposeInput, hearing: Hearing) -> s.DecomposeResult:
    chunk = inputs.chunk
    start = minutes(chunk.start)
    if inputs.granularity == "hour":
        count = max(1, math.ceil(chunk.duration_min / 60))
        lengths = [min(60, chunk.duration_min - 60 * i) for i in range(count)]
        texts = [chunk.description, *(f"still {chunk.description}" for _ in range(count - 1))]
        if count > 1 and meal_in(chunk.description):  # a meal for an hour, then company
            texts = [chunk.description, *(f"still {AFTER_A_MEAL}" for _ in range(count - 1))]
        elif count > 1:  # (the first hour's actions end without closing steps: more follows)
            texts[0] = f"{chunk.description}{FIRST_OF_MANY}"
            texts[-1] = f"{chunk.description}, then wrapping up"
    else:
        lengths = _action_lengths(chunk.duration_min, stable_rng("decompose", inputs))
        texts = action_steps(chunk.description, len(lengths))
        if not _is_home(chunk.location, inputs.resident):  # no shower at the cafe
            texts = [plain(chunk.description) if _home_only(t) else t for t in texts]
        texts = [_here(t, chunk.location) for t in texts]
        starts = itertools.accumulate([start, *lengths[:-1]])
        texts = [
            t if fitting(t, at) == t else "finishing up"
            for at, t in zip(starts, texts, strict=True)
        ]
        lengths, texts = _merged(lengths, texts)
    actions = inputs.granularity != "hour"  # (an action carries its emoji, as a model's would)
    items, offset = [], 0
    for length, text in zip(lengths, texts, strict=True):
        items.append(
            s.PlanItem(
                start=clock(start + offset),
                duration_min=length,
                location=chunk.location,
                description=text,
                emoji=emoji_for(text) if actions else "",
            )
        )
        offset += length
    return s.DecomposeResult(items=items)


def _here(action: str, location: str) -> str:
    """An action without the name of the place it is done at: the channel it is posted in
    says where, and a resident kept out (a place closed) is never said to be elsewhere."""
    area = location.split(":")[0].strip()
    if not area:
        return action
    shorter = re.sub(rf"\s+(?:at|in|to) (?:the )?{re.escape(area)}\b", "", action)
    return shorter if shorter.strip() else action


def _home_only(action: str) -> bool:
    return any(step in action for step in HOME_ONLY)


def _merged(lengths: list[int], texts: list[str]) -> tuple[list[int], list[str]]:
    """Steps that say the same thing back to back, as one longer step."""
    out: list[tuple[int, str]] = []
    for length, text in zip(lengths, texts, strict=True):
        if out and out[-1][1] == text:
            out[-1] = (out[-1][0] + length, text)
        else:
            out.append((length, text))
    return [n for n, _ in out], [t for _, t in out]


def _terms(activity: str) -> set[str]:
    terms = stems(activity)
    for word in content_words(activity):
        terms |= {stem(hint) for hint in PLACE_HINTS.get(word, ())}
    return terms


def _parts(entry: str) -> list[str]:
    return [part.strip() for part in entry.split(":") if part.strip()]


def choose_location(inputs: s.ChooseLocationInput, hearing: Hearing) -> s.ChooseLocationResult:
    if not inputs.tree:
        return s.ChooseLocationResult(path=_parts(inputs.current) or [inputs.current or "home"])
    terms = _terms(inputs.activity)
    homely = bool(set(content_words(inputs.activity)) & HOME_ACTIVITY)
    own = {w for w in words(inputs.resident) if len(w) > 2} | {first_name(inputs.resident).lower()}
    here = (_parts(inputs.current) or [""])[0].casefold()

    def score(entry: str) -> int:
        area = _parts(entry)[0]
        points = len(terms & stems(entry))
        area_words = set(words(area))
        if area_words & own and homely:
            points += 2
        elif area_words & HOME_WORDS and not area_words & own and not overlap_area(area):
            points -= 2
        return points

    def overlap_area(area: str) -> bool:
        return bool(stems(area) & stems(inputs.activity))

    scores = {entry: score(entry) for entry in inputs.tree}
    best_all = max(inputs.tree, key=lambda e: scores[e])
    local = [e for e in inputs.tree if _parts(e)[0].casefold() == here]
    best_here = max(local, key=lambda e: scores[e]) if local else None
    stay = best_here is not None and 0 < scores[best_here] >= scores[best_all] - 1
    if stay and best_here is not None:
        chosen = best_here
    elif scores[best_all] > 0:
        chosen = best_all
    else:
        chosen = best_here or best_all
    return s.ChooseLocationResult(path=_parts(chosen))

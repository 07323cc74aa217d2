"""Meals at meal times: breakfast in the morning, lunch at midday, dinner in the evening.

A plan chunk or an action whose meal falls outside that meal's hours (the day moved round an
event, a routine line without a time) becomes the meal of the hour it starts at, or a snack
between meals; a meal chunk longer than an hour is the meal for its first hour only.
"""

from __future__ import annotations

import re

DAY = 24 * 60
MEAL_HOURS = {
    "breakfast": (5 * 60, 11 * 60),
    "lunch": (11 * 60, 15 * 60),
    "dinner": (17 * 60, 22 * 60),
}
MEAL_MIN = 60  # a meal's longest stretch
AFTER_A_MEAL = "catching up with people"  # what the rest of a long meal chunk is
_MEAL = re.compile(r"\b(breakfast|lunch|dinner)\b", re.IGNORECASE)
_DETERMINED = re.compile(
    r"\b(?:a|an|the|my|his|her|their|our|big|quick|light|late|early|hearty)\s+$", re.IGNORECASE
)


def meal_in(text: str) -> str | None:
    """The meal a text names ("having lunch" -> "lunch"), if any."""
    found = _MEAL.search(text)
    return found.group(1).lower() if found else None


def in_hours(meal: str, minute: int) -> bool:
    low, high = MEAL_HOURS[meal]
    return low <= minute % DAY < high


def meal_at(minute: int) -> str | None:
    """The meal of this minute of the day, if it is a meal time."""
    return next((m for m in MEAL_HOURS if in_hours(m, minute)), None)


def fitting(description: str, start: int) -> str:
    """The description with its meal fitting the hour it starts at (``start``, minutes of the
    day): the meal of that hour, or a snack between meals."""
    meal = meal_in(description)
    if meal is None or in_hours(meal, start):
        return description
    right = meal_at(start)

    def swap(found: re.Match[str]) -> str:
        if right is not None:
            return right
        determined = _DETERMINED.search(description[: found.start()])
        return "snack" if determined else "a snack"

    return _MEAL.sub(swap, description)

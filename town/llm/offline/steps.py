"""Verb phrases for the offline brain: routine lines as "-ing" phrases, chunks as actions."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from town.llm.offline.text import words

_NOUN_ACTIVITIES: Mapping[str, str] = MappingProxyType(
    {
        "breakfast": "having breakfast",
        "lunch": "having lunch",
        "dinner": "having dinner",
        "work": "working",
        "sleep": "sleeping",
        "bed": "going to bed",
        "nap": "taking a nap",
        "class": "attending class",
        "classes": "attending classes",
        "church": "going to church",
        "coffee": "having coffee",
        "shower": "taking a shower",
        "home": "going home",
    }
)
_DOUBLED = frozenset(
    {
        "run",
        "sit",
        "get",
        "put",
        "shop",
        "stop",
        "plan",
        "jog",
        "swim",
        "chat",
        "drop",
        "grab",
        "skip",
        "hit",
        "cut",
        "dig",
        "set",
        "begin",
        "win",
        "let",
        "chop",
        "mop",
        "nap",
        "hum",
    }
)
_IRREGULAR: Mapping[str, str] = MappingProxyType(
    {"be": "being", "see": "seeing", "lie": "lying", "die": "dying", "tie": "tying"}
)

# How a kind of activity unfolds: (opening actions, main actions repeated, closing actions).
_STEPS: tuple[tuple[frozenset[str], tuple[str, ...], tuple[str, ...], tuple[str, ...]], ...] = (
    (
        frozenset({"sleep", "sleeping", "bed"}),
        ("brushing teeth", "getting into bed"),
        ("sleeping",),
        (),
    ),
    (
        frozenset({"waking", "wake", "ready"}),
        ("waking up and stretching", "brushing teeth"),
        ("taking a shower", "getting dressed"),
        ("making the bed",),
    ),
    (
        frozenset({"breakfast"}),
        ("making coffee",),
        ("cooking breakfast", "eating breakfast"),
        ("washing the dishes",),
    ),
    (frozenset({"lunch"}), ("preparing lunch",), ("eating lunch",), ("cleaning up after lunch",)),
    (
        frozenset({"dinner"}),
        ("cooking dinner",),
        ("eating dinner", "chatting over dinner"),
        ("washing the dishes",),
    ),
    (
        frozenset({"open", "opening"}),
        ("unlocking the door", "turning on the lights"),
        ("starting the coffee machine", "setting out the chairs", "{desc}"),
        ("greeting the first customers",),
    ),
    (
        frozenset({"hosting"}),
        ("welcoming the guests at the door",),
        ("raising a toast to everyone", "{desc}", "chatting with the guests"),
        ("thanking everyone for coming",),
    ),
    (
        frozenset({"party", "celebration"}),
        ("greeting the other guests",),
        ("{desc}", "chatting with friends over drinks", "dancing to the music"),
        ("saying goodbye to everyone",),
    ),
    (
        frozenset({"relax", "relaxing", "leisure"}),
        ("making tea",),
        ("relaxing on the sofa", "listening to music", "reading a book"),
        (),
    ),
    (
        frozenset({"read", "reading", "study", "studying", "research"}),
        ("picking up where they left off",),
        ("{desc}", "taking notes"),
        ("tidying the desk",),
    ),
    (
        frozenset({"walk", "walking", "jog", "jogging", "exercise"}),
        ("putting on shoes",),
        ("{desc}",),
        ("drinking some water",),
    ),
)
_GOING_TO_EVENT = re.compile(r"^going to (?=the .*\b(?:party|celebration|festival|concert)\b)")
FIRST_OF_MANY = ", for a while"  # an hour item's mark: more hours of it follow
_DEFAULT_STEPS = ((), ("{desc}",), ("finishing up",))  # (no breaks: narration of a change)


_CHAINED = frozenset(
    {
        "get",
        "go",
        "make",
        "have",
        "take",
        "eat",
        "read",
        "write",
        "do",
        "clean",
        "cook",
        "watch",
        "check",
        "chat",
        "walk",
        "prepare",
        "tidy",
        "wash",
        "brush",
        "open",
        "close",
        "serve",
        "call",
    }
)


def gerund(phrase: str) -> str:
    """A routine line as a phrase fitting after "<name> is" ("open the cafe" -> "opening ...")."""
    head, sep, tail = phrase.partition(" and ")
    first = _gerund(head)
    if sep and tail.split(" ", 1)[0] in _CHAINED and first != head.strip():
        return f"{first} and {_gerund(tail)}"
    return f"{first}{sep}{tail}"


def _gerund(phrase: str) -> str:
    text = " ".join(phrase.split()).strip(" .")
    if text.lower().startswith("is "):
        text = text[3:]
    if not text:
        return text
    first, _, rest = text.partition(" ")
    word = first.lower()
    if not word.isalpha() or word.endswith("ing"):
        return text[0].lower() + text[1:] if first[1:] == first[1:].lower() else text
    if first[1:] != first[1:].lower() or (first[0].isupper() and rest[:1].isupper()):
        return text  # an acronym or a name, not a verb
    if word in _NOUN_ACTIVITIES:
        verb = _NOUN_ACTIVITIES[word]
    elif word in _IRREGULAR:
        verb = _IRREGULAR[word]
    elif word in _DOUBLED:
        verb = word + word[-1] + "ing"
    elif word.endswith("ie"):
        verb = word[:-2] + "ying"
    elif word.endswith("e") and not word.endswith("ee") and len(word) > 2:
        verb = word[:-1] + "ing"
    else:
        verb = word + "ing"
    return f"{verb} {rest}".strip()


def plain(description: str) -> str:
    """An hour item's description as an action: without its marks ("still ...", "..., for a
    while", "..., then wrapping up"); at an event, enjoying it rather than going to it."""
    core = re.sub(r"^(?:still )+", "", description).removesuffix(", then wrapping up")
    return re.sub(_GOING_TO_EVENT, "enjoying ", core.removesuffix(FIRST_OF_MANY))


def action_steps(description: str, count: int) -> list[str]:
    """`count` concrete actions (5-15 minutes each) that make up a plan chunk."""
    found = set(words(description))
    opening, main, closing = next(
        ((o, m, c) for keys, o, m, c in _STEPS if keys & found), _DEFAULT_STEPS
    )
    # an hour item after the first ("still ...") goes on without the opening steps; one before
    # the last ("..., then wrapping up" is the last) without the closing ones. Neither mark is
    # said: narration tells what changed, never "still ..."
    core = plain(description)
    if count == 1:
        return [core]
    later = description.startswith("still ")
    if description.endswith(FIRST_OF_MANY):
        closing = ()
    if later or description.endswith(", then wrapping up"):
        opening = ()
        main = tuple(m for m in main if "toast" not in m) or main  # (one toast a party)
    if later and not description.endswith(", then wrapping up"):
        closing = ()
    opening = opening[: max(0, count - 1)]
    closing = closing[: max(0, count - len(opening) - 1)]
    middle = count - len(opening) - len(closing)
    # the main steps in their order, each for a share of the middle (said once: merged later)
    sequence = [*opening, *(main[i * len(main) // middle] for i in range(middle)), *closing]
    return [step.format(desc=core) for step in sequence]

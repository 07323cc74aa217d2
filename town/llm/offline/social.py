"""Offline thinking about people: reacting, summarising, reflecting (talk: ``talk.py``)."""

from __future__ import annotations

import re
from collections import Counter

from town.llm import schemas as s
from town.llm.offline.hearing import Hearing
from town.llm.offline.lexicon import ALARM_WORDS, GREETINGS, PLACE_WORDS, STOPWORDS
from town.llm.offline.retell import is_quote, news_in
from town.llm.offline.steps import FIRST_OF_MANY, gerund
from town.llm.offline.text import (
    content_words,
    first_name,
    importance,
    mentions,
    most_common,
    names,
    second_to_first,
    sentence,
    stable_rng,
    words,
)
from town.llm.schemas import present_named

_SPEAKER = re.compile(
    r"^\W*([A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*){0,3})\s*(?:\([^)]*\))?\s*"
    r"(?::|\b(?:says|said|asks|asked|writes|wrote|shouts|shouted|calls|tells)\b)"
)
_BROKEN = re.compile(
    r"(?:the\s+|a\s+)?([\w':, -]+?)\s+(?:is|are)\s+"
    r"(burning|on fire|smoking|leaking|broken|flooding)",
    re.IGNORECASE,
)
_FIRE = frozenset({"burning", "on fire", "smoking"})
_MET = re.compile(r"^([A-Z][\w'-]+(?: [A-Z][\w'-]+)+) is ")
_CHAT_CHANCE = 0.9  # meeting someone one knows: stop for a chat, nine times in ten
_HELLO_CHANCE = 0.1  # meeting someone one does not know: say hello, one time in ten
_MINGLING = {"hosting", "welcoming", "greeting", "chatting", "mingling"}
"""Doing one of these (a host, a guest greeting the others), anyone met is met as one known."""
_DIRECTIVE = re.compile(r"^\W*(?:inner voice|directive)\b\W*", re.IGNORECASE)
_DONE = re.compile(  # a plan memory's first step (town/tick/planning.py)
    r"^(?P<who>.+?) plans, at (?P<where>[^:]+)(?::[^:]+)?: \d\d:\d\d (?P<what>[^;]+)"
)
_PLANS = re.compile(r"\bplans(?: to be|, at)\b")  # a plan memory (town/tick/planning.py)
_QUOTED = re.compile(r'"[^"]*"?|“[^”]*”?')  # what someone said, in quotes


def speaker_of(observation: str) -> str | None:
    match = _SPEAKER.match(observation)
    return match.group(1) if match else None


_WILL = re.compile(
    r"^(?:you|i)\s+(?:should|must|will|need to|want to|have to|are going to|am going to|could)"
    r"\s+|^(?:please|maybe|go and)\s+",
    re.IGNORECASE,
)


def intent(directive: str) -> str:
    """What an inner voice urges, as a bare verb phrase in the resident's words ("You should
    tell Isabella about your research" -> "tell Isabella about my research"), or ''."""
    said = _DIRECTIVE.sub("", directive).strip(' "').rstrip(" .!")
    verb = _WILL.sub("", second_to_first(said))
    return "" if re.match(r"^(?:i|my|me|you|your)\b", verb, re.IGNORECASE) else verb


def acting_on(directive: str) -> str:
    """The action an inner voice prompts, in the resident's own words: "You should visit the
    park" -> "visiting the park"; what cannot be read as an action becomes "mulling something
    over". It is acted on, never quoted."""
    said = _DIRECTIVE.sub("", directive).strip(' "').rstrip(" .!")
    verb = _WILL.sub("", second_to_first(said))
    if re.match(r"^(?:i|my|me|you|your)\b", verb, re.IGNORECASE):
        return "mulling something over"
    action = gerund(verb.split(".")[0])
    first = action.split(" ", 1)[0]
    return action if first.endswith("ing") and len(action) < 80 else "mulling something over"


def _addressed(observation: str, resident: str) -> bool:
    said = observation.split(":", 1)[1] if ":" in observation else observation
    return mentions(said, resident)


def react(inputs: s.ReactInput, hearing: Hearing) -> s.ReactResult:
    """React to danger, to words addressed to the resident, or to meeting someone present;
    talk only to someone present (a visitor is answered when heard: ``town.inputs.chat``)."""
    observation = inputs.observation
    found = set(words(observation))
    speaker = speaker_of(observation)
    if speaker is not None and mentions(speaker, inputs.resident):
        speaker = None  # the resident's own words
    listener = present_named(inputs, speaker)
    if _DIRECTIVE.match(observation):
        return s.ReactResult(react=True, reaction=acting_on(observation), talk_to=None)
    if found & ALARM_WORDS:
        # what the resident sees for itself ("the stove is burning"), never words it heard:
        # an alarm in someone's words sends it to help them, none of their words in its deed
        broken = None if is_quote(observation) else _BROKEN.search(observation)
        if broken:
            thing = re.split(r"\s+(?:in|at|of)\s+", broken.group(1))[0].split(":")[-1].strip()
            verb = "putting out" if broken.group(2).lower() in _FIRE else "fixing"
            return s.ReactResult(react=True, reaction=f"rushing over and {verb} the {thing}")
        who = speaker or "whoever needs it"
        return s.ReactResult(react=True, reaction=f"hurrying over to help {who}", talk_to=listener)
    if speaker and _addressed(observation, inputs.resident):
        if "?" in observation:
            return s.ReactResult(react=True, reaction=f"answering {speaker}", talk_to=listener)
        if found & GREETINGS:
            return s.ReactResult(react=True, reaction=f"greeting {speaker}", talk_to=listener)
    met = _MET.match(observation)
    person = present_named(inputs, met.group(1)) if met else None
    if person is not None and person != inputs.resident:
        roll = stable_rng("react", inputs).random()
        mingling = _MINGLING & set(words(inputs.current_action))  # a host, a guest greeting
        if mentions(inputs.relationship, person) or mingling:
            if roll < _CHAT_CHANCE:
                reaction = f"stopping to chat with {person}"
                return s.ReactResult(react=True, reaction=reaction, talk_to=person)
        elif roll < _HELLO_CHANCE:
            return s.ReactResult(react=True, reaction=f"saying hello to {person}", talk_to=person)
    return s.ReactResult(react=False, reaction="", talk_to=None)


def summarize(inputs: s.SummarizeInput, hearing: Hearing) -> s.SummarizeResult:
    """Who the resident is, what is on its mind and what it has been doing, as a person would
    put it, the full name once: its own memories (of it or said to it), news heard told as
    news, no plan of what is to come (the card shows that) and no step ("stopped to: ...")."""
    name = inputs.resident
    own = [t for m in inputs.memories if mentions(m, name) and (t := _summed(m, name))]
    own.sort(key=lambda t: not t.startswith(name))
    chosen = [sentence(t) for t in dict.fromkeys(own)][:2]
    done = _done(inputs.memories)
    chosen += [f"{name} has been {done}."] if done else []
    again = re.compile(rf"\b{re.escape(name)}\b(?! said)")  # (whose words stay said in full)
    later = [again.sub(first_name(name), m) for m in chosen[1:]]
    return s.SummarizeResult(summary=" ".join([*chosen[:1], *later]) or f"This is {name}.")


def _summed(memory: str, name: str) -> str | None:
    """A memory as a summary holds it: of what someone said only the news (a visitor's claim is
    not news)."""
    if is_quote(memory):
        news = news_in(memory, name)
        return news[0] if news and not news[0].startswith("a visitor") else None
    return None if ":" in memory or _PLANS.search(memory) else memory


def _done(memories: list[str]) -> str:
    """What the plan memories say one has been doing (two things, each once, and where)."""
    found = [d for m in memories if (d := _DONE.match(m))]
    doing: dict[str, str] = {}
    for d in found:
        what = d["what"].removeprefix("still ").removesuffix(FIRST_OF_MANY)
        where = "" if d["where"] in what else f" at {d['where']}"
        doing.setdefault(" ".join(what.split()[:3]), f"{what}{where}")
    return " and ".join(list(doing.values())[:2])


def _topics(resident: str, texts: list[str]) -> tuple[list[str], list[str]]:
    """The names and the nouns met most often in these texts, the resident's own left out, and
    none from inside what someone said (a visitor's words make no place or topic of one's
    own: "THE TOWN IS ON FIRE" is no place a resident spends time at)."""
    texts = [_PLANS.sub(" ", _QUOTED.sub(" ", t)) for t in texts]  # ("plans" is no topic)
    own = {w for w in words(resident)}
    people = [n for t in texts for n in names(t) if not set(words(n)) <= own]
    named = {w for n in people for w in words(n)} | own
    nouns = [
        w
        for t in texts
        for w in content_words(t)
        if w not in named and w not in STOPWORDS and not w.endswith(("ing", "ed")) and len(w) > 3
    ]
    return most_common(people, 5), most_common(nouns, 5)


def reflect_questions(
    inputs: s.ReflectQuestionsInput, hearing: Hearing
) -> s.ReflectQuestionsResult:
    resident = inputs.resident
    people, nouns = _topics(resident, inputs.statements)
    questions = [f"What is {resident}'s relationship with {p}?" for p in people[:2]]
    questions += [f"How does {resident} feel about the {n}?" for n in nouns[:2]]
    questions += [
        f"What matters most to {resident} these days?",
        f"What has {resident} been busy with lately?",
        f"Who has {resident} been spending time with?",
    ]
    return s.ReflectQuestionsResult(questions=list(dict.fromkeys(questions))[:3])


def reflect_insights(inputs: s.ReflectInsightsInput, hearing: Hearing) -> s.ReflectInsightsResult:
    found: dict[str, s.Insight] = {}
    for group in inputs.questions:
        for insight in _insights(inputs.resident, group):
            found.setdefault(insight.text, insight)
    return s.ReflectInsightsResult(insights=list(found.values())[:15])


def _insights(resident: str, group: s.QuestionStatements) -> list[s.Insight]:
    """Up to five insights about one question, from the statements retrieved for it."""
    statements = group.statements
    people, nouns = _topics(resident, [st.text for st in statements])
    asked = set(words(group.question))
    counts = Counter(
        {t: sum(t.lower() in st.text.lower() for st in statements) for t in [*people, *nouns]}
    )
    topics = sorted(counts, key=lambda t: (not set(words(t)) & asked, -counts[t]))
    insights: list[s.Insight] = []
    for topic in topics:
        cites = [st.id for st in statements if topic.lower() in st.text.lower()]
        if not cites or len(insights) == 5 or (len(cites) < 2 and len(insights) >= 2):
            continue
        if topic in nouns:
            text = f"The {topic} has been on {resident}'s mind"
        elif set(words(topic)) & PLACE_WORDS:
            text = f"{resident} spends a good deal of time at {topic}"
        elif counts[topic] > 1:
            text = f"{resident} has been spending time with {topic}"
        else:
            text = f"{resident} knows {topic}"
        insights.append(s.Insight(text=text, cites=cites, importance=importance(text)))
    if not insights and statements:
        insights.append(
            s.Insight(
                text=f"{resident} has had an ordinary few days",
                cites=[st.id for st in statements[:3]],
                importance=2,
            )
        )
    return insights

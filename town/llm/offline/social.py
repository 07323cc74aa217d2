"""Offline thinking about people: reacting, talking, answering, summarising, reflecting."""

from __future__ import annotations

import re
from collections import Counter

from town.llm import schemas as s
from town.llm.offline.lexicon import AI_WORDS, ALARM_WORDS, GREETINGS, PLACE_WORDS, STOPWORDS
from town.llm.offline.text import (
    content_words,
    first_name,
    first_person,
    importance,
    mentions,
    most_common,
    names,
    overlap,
    second_to_first,
    sentence,
    stable_rng,
    words,
)

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
_DIRECTIVE = re.compile(r"^\W*(?:inner voice|directive)\b\W*", re.IGNORECASE)
_AI_QUESTION = re.compile(r"\b(?:are|r)\s+(?:you|u)\b(.*)", re.IGNORECASE)
_GOODBYE = frozenset({"bye", "goodbye", "later", "farewell", "night"})


def speaker_of(observation: str) -> str | None:
    match = _SPEAKER.match(observation)
    return match.group(1) if match else None


def _addressed(observation: str, resident: str) -> bool:
    said = observation.split(":", 1)[1] if ":" in observation else observation
    return mentions(said, resident)


def react(inputs: s.ReactInput) -> s.ReactResult:
    observation = inputs.observation
    found = set(words(observation))
    speaker = speaker_of(observation)
    if speaker is not None and mentions(speaker, inputs.resident):
        speaker = None  # the resident's own words
    if _DIRECTIVE.match(observation):
        thought = second_to_first(_DIRECTIVE.sub("", observation).strip(' "'))
        return s.ReactResult(react=True, reaction=f"thinking it over: {thought}", talk_to=None)
    if found & ALARM_WORDS:
        broken = _BROKEN.search(observation)
        if broken:
            thing = re.split(r"\s+(?:in|at|of)\s+", broken.group(1))[0].split(":")[-1].strip()
            verb = "putting out" if broken.group(2).lower() in _FIRE else "fixing"
            return s.ReactResult(react=True, reaction=f"rushing over and {verb} the {thing}")
        who = speaker or "whoever needs it"
        return s.ReactResult(react=True, reaction=f"hurrying over to help {who}", talk_to=speaker)
    if speaker and _addressed(observation, inputs.resident):
        if "?" in observation:
            return s.ReactResult(react=True, reaction=f"answering {speaker}", talk_to=speaker)
        if found & GREETINGS:
            return s.ReactResult(react=True, reaction=f"greeting {speaker}", talk_to=speaker)
    met = _MET.match(observation)
    if met and met.group(1) != inputs.resident:
        person, roll = met.group(1), stable_rng("react", inputs).random()
        if mentions(inputs.relationship, person):
            if roll < _CHAT_CHANCE:
                reaction = f"stopping to chat with {person}"
                return s.ReactResult(react=True, reaction=reaction, talk_to=person)
        elif roll < _HELLO_CHANCE:
            return s.ReactResult(react=True, reaction=f"saying hello to {person}", talk_to=person)
    return s.ReactResult(react=False, reaction="", talk_to=None)


def _to_listener(memory: str, speaker: str, listener: str) -> str:
    """Retell a memory to the listener: the listener is "you", the speaker is "I"."""
    text = memory
    for name in (listener, first_name(listener)):
        text = re.sub(rf"\b{re.escape(name)}(?:'s|’s)", "your", text)
        text = re.sub(rf"\b{re.escape(name)} is\b", "you are", text)
        text = re.sub(rf"\b{re.escape(name)} was\b", "you were", text)
        text = re.sub(rf"\b{re.escape(name)} has\b", "you have", text)
        text = re.sub(rf"\b{re.escape(name)}\b", "you", text)
    return first_person(text, speaker).rstrip(" .!")


def _best_memory(memories: list[str], query: str) -> str | None:
    scored = [(overlap(m, query), -index, m) for index, m in enumerate(memories)]
    best = max(scored, default=None)
    return best[2] if best and best[0] > 0 else None


def _question(text: str) -> str:
    """The sentence of the text that asks something."""
    asked = [part for part in re.findall(r"[^.!?]*\?", text) if part.strip()]
    return asked[-1].strip() if asked else text


def utter(inputs: s.UtterInput) -> s.UtterResult:
    rng = stable_rng("utter", inputs)
    name = first_name(inputs.listener)
    history = inputs.history
    mine = [u for u in history if u.speaker == inputs.speaker]
    said = " ".join(u.text for u in mine).lower()
    last = history[-1] if history else None
    if last is not None and last.speaker != inputs.speaker and set(words(last.text)) & _GOODBYE:
        return s.UtterResult(text=f"Bye, {name}! Take care.", end=True)
    if last is not None and last.speaker != inputs.speaker and _asks_if_ai(last.text):
        honest = f"Yes, I'm an AI character, {name}: {inputs.speaker}, a simulated resident here."
        return s.UtterResult(text=honest, end=False)
    if len(mine) >= 2 or len(history) >= 6:
        farewell = f"Well, I should get going. It was nice talking, {name}!"
        return s.UtterResult(text=farewell, end=True)
    about = [m for m in inputs.memories if mentions(m, inputs.listener)] or inputs.memories
    memory = next(
        (m for m in about if _to_listener(m, inputs.speaker, inputs.listener).lower() not in said),
        None,
    )
    parts: list[str] = []
    if last is None:
        parts.append(
            rng.choice((f"Hi {name}!", f"Hey {name}, good to see you.", f"Oh, hello {name}!"))
        )
    elif "?" in last.text:
        question = _question(last.text)
        answer = _best_memory(inputs.memories, question)
        if re.match(r"\W*how\b", question, re.IGNORECASE):
            parts.append(rng.choice(("Pretty well, thanks!", "Not bad at all, thanks for asking.")))
        elif answer is not None:
            told = _to_listener(answer, inputs.speaker, inputs.listener)
            parts.append(sentence(f"As far as I know, {told}"))
            memory = None
        else:
            parts.append("Hmm, I'm not sure about that, to be honest.")
    else:
        parts.append(rng.choice(("Oh, I see.", f"That's interesting, {name}.", "Ha, fair enough.")))
    if inputs.directive and "news" not in said:
        parts.append(f"I have some news: {sentence(second_to_first(inputs.directive))}")
    elif memory is not None:
        parts.append(
            f"I remember that {_to_listener(memory, inputs.speaker, inputs.listener)}. "
            "How is that going?"
        )
    elif last is None:
        parts.append(f"What brings you to {inputs.location}?")
    return s.UtterResult(text=" ".join(parts), end=False)


def _asks_if_ai(question: str) -> bool:
    match = _AI_QUESTION.search(question)
    return match is not None and bool(set(words(match.group(1))) & AI_WORDS)


def interview(inputs: s.InterviewInput) -> s.InterviewResult:
    question, resident = inputs.question, inputs.resident
    intro = first_person(inputs.summary, resident).strip()
    if _asks_if_ai(question):
        answer = f"Yes, I am an AI character, a simulated resident of this town. I'm {resident}."
        return s.InterviewResult(answer=answer)
    if re.search(r"introduce yourself|who are you|about yourself", question, re.IGNORECASE):
        return s.InterviewResult(answer=sentence(intro) if intro else f"I'm {resident}.")
    ranked = sorted(
        ((overlap(m, question), -i, m) for i, m in enumerate(inputs.memories)), reverse=True
    )
    relevant = [m for score, _i, m in ranked[:2] if score > 0]
    if not relevant:
        return s.InterviewResult(answer="I'm not sure. I don't remember anything about that.")
    told = [sentence(first_person(m, resident)) for m in relevant]
    return s.InterviewResult(answer=" ".join(["From what I remember:", *told]))


def summarize(inputs: s.SummarizeInput) -> s.SummarizeResult:
    own = [m for m in inputs.memories if mentions(m, inputs.resident)]
    chosen = (own or inputs.memories)[:3]
    text = " ".join([f"This is {inputs.resident}.", *(sentence(m) for m in chosen)])
    return s.SummarizeResult(summary=text)


def _topics(resident: str, texts: list[str]) -> tuple[list[str], list[str]]:
    """The names and the nouns met most often in these texts, the resident's own left out."""
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


def reflect_questions(inputs: s.ReflectQuestionsInput) -> s.ReflectQuestionsResult:
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


def reflect_insights(inputs: s.ReflectInsightsInput) -> s.ReflectInsightsResult:
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

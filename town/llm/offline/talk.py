"""Offline talk: a conversation's next line, and an interview's answer.

A line follows a sentence plan: answer or acknowledge what was just said, then one move of the
speaker's own (share news it holds, ask about something it remembers of the listener, ask back),
or close the talk. Phrasings come from ``lexicon.toml`` ([talk]); memories are retold with
``retell`` (never quoted), an inner voice is acted on (never quoted), and no line is said twice
in one conversation.
"""

from __future__ import annotations

import random
import re

from town.llm import schemas as s
from town.llm.offline.events import NOW, happenings, now_in
from town.llm.offline.hearing import Hearing
from town.llm.offline.lexicon import (
    AI_WORDS,
    DOING_WORDS,
    HUMAN_WORDS,
    NEWS_WORDS,
    PLAN_WORDS,
    STOPWORDS,
    TALK,
)
from town.llm.offline.retell import is_directive, is_quote, news_in, tell
from town.llm.offline.social import intent
from town.llm.offline.text import (
    first_name,
    first_person,
    mentions,
    overlap,
    sentence,
    stable_rng,
    words,
)

_AI_QUESTION = re.compile(r"\b(?:are|r)\s+(?:you|u)\b(.*)", re.IGNORECASE)
_GOODBYE = frozenset({"bye", "goodbye", "later", "farewell", "night"})
_PLAN = re.compile(
    r"plans to be (?P<what>.+?) at (?P<where>[^:]+?)(?:: [^:]+?)* from (?P<at>\d\d:\d\d)"
)
_KNOW_PERSON = re.compile(
    r"\W*(?:[Dd]o|[Dd]id) you know (?P<who>[A-Z][\w'’-]*(?: [A-Z][\w'’-]*)*)\s*\??\s*$"
)
MAX_LINES = 2  # a speaker's lines in one conversation before the next one takes its leave

_SENTENCE_START = re.compile(r"(?<=[.?!] )[a-z]")  # news begun lowercase ("a visitor said")


def _say(rng: random.Random, plan: str, **slots: str) -> str:
    return rng.choice(TALK[plan]).format(**slots)


def asks_if_ai(question: str) -> bool:
    match = _AI_QUESTION.search(question)
    return match is not None and bool(set(words(match.group(1))) & AI_WORDS)


def honest(question: str, me: str) -> str:
    """ "Are you a real person?" -> "No, I'm an AI character"; "Are you an AI?" -> "Yes, ..."."""
    asked = _AI_QUESTION.search(question)
    human = bool(asked and set(words(asked.group(1))) & HUMAN_WORDS)
    return TALK["ai_no" if human else "ai_yes"][0].format(me=me)


def _question(text: str) -> str:
    asked = [part for part in re.findall(r"[^.!?]*\?", text) if part.strip()]
    return asked[-1].strip() if asked else ""


def plans_in(memories: list[str]) -> list[tuple[str, str, str]]:
    """(start, what, where) of the day-plan memories among these, in time order."""
    found = {
        (m["at"], m["what"], m["where"].split(" at ")[-1])
        for text in memories
        if (m := _PLAN.search(text))
    }
    return sorted(found)


def _plans_told(memories: list[str]) -> str | None:
    plans = plans_in(memories)[:3]
    if not plans:
        return None
    steps = [f"{what} at {where} from {at}" for at, what, where in plans]
    listed = steps[0] if len(steps) == 1 else ", then ".join(steps)
    return f"Today I'm {listed}."


def _doing(speaker: str, summary: str, memories: list[str]) -> str | None:
    """What the speaker is up to: its status ("Right now <name> is ..."), or its plans."""
    found = re.search(rf"Right now {re.escape(speaker)} is (?P<what>[^.]+)\.", summary)
    if found:
        return found["what"]
    plans = plans_in(memories)
    return f"{plans[0][1]} at {plans[0][2]}" if plans else None


def _at_party(inputs: s.UtterInput) -> bool:
    """Is the speaker at a party now (its status or this part of its day says so, or an event
    it knows of is going on where it is)?"""
    speaker = re.escape(inputs.speaker)
    found = re.findall(
        rf"(?:Right now|This part of the day) {speaker} is ([^.]+)\.", inputs.speaker_summary
    )
    if any("party" in words(f) for f in found):
        return True
    now, place = now_in(inputs.speaker_summary), inputs.location.split(":")[0].strip()
    known = [e for text in [inputs.speaker_summary, *inputs.memories] for e in happenings(text)]
    return now is not None and any(e.when(*now) == "on" and e.where == place for e in known)


def old_news(inputs: s.UtterInput, news: str) -> bool:
    """Is this news of an event that has begun (no news any more)?"""
    return _old(news, now_in(inputs.speaker_summary), [inputs.speaker_summary, *inputs.memories])


def _old(news: str, now: tuple[str, int] | None, known: list[str]) -> bool:
    """Has an event this news tells of begun: one it names the time of, or one known whose kind
    it speaks of ("the party is just getting going")?"""
    kinds = set(words(news))
    named = [e for text in known for e in happenings(text) if e.what.split()[-1].lower() in kinds]
    return now is not None and any(e.begun(*now) for e in [*happenings(news), *named])


def _hosting(inputs: s.UtterInput) -> bool:
    """Is the speaker the host of the party it is at (its status, or what it knows of the
    party, says so)?"""
    return _gives(inputs.speaker, [inputs.speaker_summary, *inputs.memories])


def _gives(resident: str, texts: list[str]) -> bool:
    giving = rf"\b{re.escape(resident)} is (?:hosting|planning|throwing|giving)\b[^.]*\bparty\b"
    return any(re.search(giving, t) for t in texts)


def _mood(inputs: s.UtterInput, plan: str) -> str:
    """The phrasings of ``plan`` for where the speaker is: at a party (as its host or a guest)
    the talk is of the party, elsewhere the everyday ones."""
    if not _at_party(inputs):
        return plan
    for variant in (f"party_host_{plan}" if _hosting(inputs) else "", f"party_{plan}"):
        if variant in TALK:
            return variant
    return plan


def _answer(inputs: s.UtterInput, question: str, rng: random.Random, name: str) -> str:
    asked = set(words(question))
    doing = _doing(inputs.speaker, inputs.speaker_summary, inputs.memories)
    if re.search(r"\b(?:how|what) about you\b", question, re.IGNORECASE):
        fine = _say(rng, _mood(inputs, "how_are_you"))
        return f"{fine} {_say(rng, 'doing', doing=doing)}" if doing else fine
    if re.search(r"\bhow\b", question, re.IGNORECASE) and asked & {"you", "going", "doing"}:
        return _say(rng, _mood(inputs, "how_are_you"))
    if "party" in asked and _at_party(inputs):  # "Are you enjoying the party?"
        return _say(rng, _mood(inputs, "how_are_you"))
    if asked & (PLAN_WORDS | DOING_WORDS):
        told = _plans_told(inputs.memories)
        if asked & PLAN_WORDS and told:
            return told
        if doing:
            return _say(rng, "doing", doing=doing)
        own = [t for m in inputs.memories if (t := tell(m, inputs.speaker, inputs.listener))]
        mine = [t for t in own if t.startswith("I ") and not set(words(t)) & NEWS_WORDS]
        if mine:
            return f"Oh, the usual. {sentence(mine[0])}"
        if inputs.location:  # asked what it is up to: at least where it is, never "no idea"
            return _say(rng, "idle", place=inputs.location.split(":")[0])
    best = max(((overlap(m, question), -i, m) for i, m in enumerate(inputs.memories)), default=None)
    if best and best[0] > 0:
        told = tell(best[2], inputs.speaker, inputs.listener)
        if told and told.startswith("I "):  # (asked about oneself)
            return sentence(told)
        news = news_in(best[2], inputs.speaker)
        if news and not old_news(inputs, news[0]):
            return sentence(news[0])
    return _say(rng, _mood(inputs, "unsure"), name=name)


def _news_told(text: str) -> str:
    """The sentence of a line that tells news ("By the way, Sam is running for mayor.")."""
    openings = tuple(p.split("{")[0].strip() for p in TALK["news"])
    parts = re.split(r"(?<=[.!?])\s+", text)
    return next((p for p in parts if p.startswith(openings)), text)


def _shares_news(text: str) -> bool:
    """Does this line tell news (not just react to it)?"""
    return any(
        part.startswith(tuple(p.split("{")[0].strip() for p in TALK["news"]))
        for part in re.split(r"(?<=[.!?])\s+", text)
    ) or "planning" in words(text)


def _news(inputs: s.UtterInput, said: str) -> tuple[str, str] | None:
    """News the speaker holds that this conversation has not brought up yet."""
    for memory in inputs.memories:
        found = news_in(memory, inputs.speaker)
        if found is None or found[1] == inputs.listener or old_news(inputs, found[0]):
            continue
        if found[0].startswith((inputs.listener, first_name(inputs.listener) + " ")):
            continue  # no one is told their own news
        if found[0].startswith(first_name(inputs.speaker) + " "):
            continue  # one's own news is told from one's own memory, in the first person
        if not set(words(found[0])) & NEWS_WORDS:
            continue
        key = next(w for w in words(found[0]) if w in NEWS_WORDS)
        if key not in said:
            return found
    return None


def utter(inputs: s.UtterInput) -> s.UtterResult:
    rng = stable_rng("utter", inputs, exclude={"visitor"})
    name, history = first_name(inputs.listener), inputs.history
    mine = [u.text for u in history if u.speaker == inputs.speaker]
    said = " ".join(u.text for u in history).lower()
    last = history[-1] if history and history[-1].speaker != inputs.speaker else None
    if last is not None and set(words(last.text)) & _GOODBYE:
        return s.UtterResult(text=_unsaid(rng, "bye", history, name=name), end=True)
    parts: list[str] = []
    if last is None and not history:
        parts.append(_say(rng, _mood(inputs, "greet"), name=name))
    elif last is not None and set(words(last.text)) & NEWS_WORDS and _shares_news(last.text):
        told = _news_told(last.text)
        party = "party" in words(told)
        mine_told = re.search(rf"\b{re.escape(first_name(inputs.speaker))} is\b", told)
        here = _at_party(inputs)
        plan = (
            "at_event"
            if party and here
            else "own_news"
            if mine_told
            else "party_reply"
            if party
            else "news_reply"
        )
        parts.append(_unsaid(rng, _mood(inputs, plan), history))
    elif last is not None and (question := _question(last.text)):
        parts.append(
            honest(question, inputs.speaker)
            if asks_if_ai(question)
            else _answer(inputs, question, rng, name)
        )
    elif last is not None and "party" in words(last.text) and _at_party(inputs):
        parts.append(_unsaid(rng, _mood(inputs, "at_event"), history))
    elif last is not None:
        parts.append(_say(rng, _mood(inputs, "ack"), name=name))
    if len(mine) >= MAX_LINES or len(history) >= 4:
        parts.append(_unsaid(rng, _mood(inputs, "close"), history, name=name))
        return s.UtterResult(text=" ".join(parts), end=True)
    parts.append(_move(inputs, rng, name, f"{said} {' '.join(parts).lower()}"))
    text = " ".join(p for p in parts if p)
    if any(text == u.text for u in history):
        text = f"{parts[0]} {_unsaid(rng, _mood(inputs, 'ask_back'), history, name=name)}"
    return s.UtterResult(text=text, end=False)


def _move(inputs: s.UtterInput, rng: random.Random, name: str, said: str) -> str:
    """The speaker's own move: news, an inner voice acted on, a memory of the listener, a
    question back."""
    party = _at_party(inputs)
    if party:  # at the party: it is what one talks about (its host raises a toast)
        if "party" not in said or (_hosting(inputs) and "toast" not in said):
            return _say(rng, _mood(inputs, "at_event"))
        said += " party"  # (its news is old now)
    news = _news(inputs, said)
    if news is not None:
        line = _SENTENCE_START.sub(lambda m: m.group(0).upper(), _say(rng, "news", news=news[0]))
        if "party" in words(news[0]) and news[1] == inputs.speaker:
            line += " " + _say(rng, "invite")
        return line
    if inputs.directive:  # acted on: what it points at is brought up, in the speaker's words
        about = re.sub(rf"\b{re.escape(name)}\b", "", inputs.directive)
        ranked = sorted(((overlap(m, about), m) for m in inputs.memories), reverse=True)
        for score, memory in ranked:
            told = tell(memory, inputs.speaker, inputs.listener)
            if score > 0 and told and told.lower() not in said:
                return _say(rng, "about_you" if told.startswith("you") else "about_me", told=told)
        urged = intent(inputs.directive)
        urged = re.sub(rf"\b{re.escape(inputs.listener)}\b|\b{re.escape(name)}\b", "you", urged)
        if urged and urged.split()[0].lower() in {"tell", "ask", "invite", "talk"}:
            return sentence(f"I wanted to {urged[0].lower()}{urged[1:]}")
        if "mind" not in said:
            return _say(rng, "on_mind", name=name)
    for memory in inputs.memories:
        told = tell(memory, inputs.speaker, inputs.listener)
        if told is None or told.lower() in said or not told.startswith(("you ", "I ")):
            continue
        if re.match(r"^(?:you are|I am) \w+ing\b", told) and len(told.split()) <= 8:
            continue  # what someone was just doing ("you are waking up"): no topic
        if set(words(told)) & NEWS_WORDS:
            continue  # news is shared as news, once
        return _say(rng, "about_you" if told.startswith("you") else "about_me", told=told)
    if not inputs.history and not party:
        return _say(rng, "place", place=inputs.location.split(":")[0])
    return _unsaid(rng, _mood(inputs, "ask_back"), [], name=name, avoid=said)


def _unsaid(
    rng: random.Random, plan: str, history: list[s.Utterance], avoid: str = "", **slots: str
) -> str:
    """A phrasing of ``plan`` not yet said in this conversation (if there is one)."""
    spoken = avoid or " ".join(u.text for u in history).lower()
    options = [p.format(**slots) for p in TALK[plan]]
    fresh = [p for p in options if p.lower() not in spoken]
    return rng.choice(fresh or options)


def _about_person(who: str, resident: str, listener: str, memories: list[str]) -> str:
    """ "Do you know Mei Lin?": what the resident remembers of that person, or that it does not
    know them."""
    about = [m for m in memories if mentions(m, who)]
    for memory in about:
        told = tell(memory, resident, listener)
        if told and mentions(told, who):
            return f"Yes, I know {who}. {sentence(told)}"
    if about:
        return f"Yes, I know {who}; we have talked."
    return f"I don't think I know {who}."


def interview(inputs: s.InterviewInput, hearing: Hearing) -> s.InterviewResult:
    question, resident = inputs.question, inputs.resident
    if asks_if_ai(question):
        return s.InterviewResult(answer=honest(question, resident))
    if re.search(r"introduce yourself|who are you|about yourself", question, re.IGNORECASE):
        intro = first_person(NOW.sub("", inputs.summary), resident).strip()
        return s.InterviewResult(answer=sentence(intro) if intro else f"I'm {resident}.")
    asked = set(words(question))
    memories = [m for m in inputs.memories if not is_directive(m)]
    now, known = now_in(inputs.summary), [inputs.summary, *memories]
    for event in (e for text in known for e in happenings(text)) if now else ():
        if event.what.split()[-1].lower() in asked and now and event.begun(*now):  # "the party?"
            return s.InterviewResult(answer=event.told(*now, host=_gives(resident, known)))
    if asked & (PLAN_WORDS | DOING_WORDS) and (told := _plans_told(memories)):
        return s.InterviewResult(answer=told)
    listener = inputs.asker or "someone"
    person = _KNOW_PERSON.match(question)
    if person:
        return s.InterviewResult(answer=_about_person(person["who"], resident, listener, memories))
    ranked = sorted(((overlap(m, question), -i, m) for i, m in enumerate(memories)), reverse=True)
    answers: list[str] = []
    for score, _i, memory in ranked:
        if score <= 0 or len(answers) == 2:
            break
        news = news_in(memory, resident)
        if news is not None and (not overlap(news[0], question) or _old(news[0], now, known)):
            continue  # other news than what was asked about, or news no more
        told = tell(memory, resident, listener) if news is None else news[0]
        if told and not is_quote(told) and sentence(told) not in answers:
            answers.append(sentence(told))
    if not answers:
        topic = [w for w in words(question) if w not in STOPWORDS and len(w) > 3]
        about = f" about {topic[-1]}" if topic else ""
        return s.InterviewResult(answer=f"I'm not sure. I don't know anything{about}, sorry.")
    yes = re.match(r"\W*(?:do|did|have|has)\b", question, re.IGNORECASE)
    return s.InterviewResult(answer=" ".join(["Yes.", *answers] if yes else answers))

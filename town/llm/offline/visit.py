"""A resident's answer to a visitor: what the line is (``hearing``), answered from what the
resident knows: its persona, what it is doing and where, today's plan, the news it holds (its
own first: a host talks of its party) and its memories.

A greeting is greeted back by name, a question about the resident is answered in the first
person, thanks graciously, a goodbye with a goodbye. The visitor closes the thread, never the
resident, and no answer repeats an earlier one in the thread. What the resident knows comes in
the ``utter`` inputs: the situation line ``town.inputs.chat`` writes ("Isabella Rodriguez, 34,
is the owner of Hobbs Cafe; friendly, outgoing and hospitable. ... Right now ... It is Monday
09:10.") and the memories recalled for the words, the day's plan and the news.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from town.llm import schemas as s
from town.llm.offline.events import happenings, now_in
from town.llm.offline.hearing import Heard, Hearing
from town.llm.offline.lexicon import NEWS_WORDS, VISIT
from town.llm.offline.retell import news_in, tell
from town.llm.offline.talk import honest, old_news, plans_in
from town.llm.offline.talk import utter as talk_utter
from town.llm.offline.text import first_name, mentions, names, overlap, sentence, stable_rng
from town.llm.schemas import minutes


@dataclass
class Situation:
    """The resident as the visitor meets it, read from the ``utter`` inputs."""

    full: str
    me: str
    place: str
    doing: str
    age: str = ""
    work: str = ""
    traits: str = ""
    home: str = ""
    clock: str = ""
    plans: list[tuple[str, str, str]] = field(default_factory=list)

    @classmethod
    def of(cls, inputs: s.UtterInput) -> Situation:
        name, summary = inputs.speaker, inputs.speaker_summary
        who = re.escape(name)
        place = inputs.location.split(":")[0].strip() or "here"
        found = re.search(
            rf"Right now {who} is (?P<what>[^.]+?)(?: at {re.escape(place)})?\.", summary
        )
        me = cls(name, first_name(name), place, found["what"] if found else "taking it easy")
        persona = re.search(
            rf"{who}, (?P<age>\d+), is (?P<work>[^;.]+); (?P<traits>[^.]+)\.", summary
        )
        if persona:
            me.age, me.work, me.traits = persona["age"], persona["work"], persona["traits"]
        home = re.search(rf"{who} lives at (?P<home>[^.]+)\.", summary)
        if home:
            me.home = re.sub(rf"^{who}'s\b", "my", home["home"])
            if home["home"] == place:  # at home: "welcome to my home"
                me.place = "my home"
        clock = re.search(r"It is [^.]*?(\d\d:\d\d)\.", summary)
        me.clock = clock[1] if clock else ""
        me.plans = [(at, _mine(what), where) for at, what, where in plans_in(inputs.memories)]
        return me

    def next_plan(self) -> str | None:
        later = [(at, what, where) for at, what, where in self.plans if at > self.clock]
        if not later or not self.clock:
            return None
        at, what, where = later[0]
        return f"{what} at {where} from {at}" if where not in what else f"{what} from {at}"


def _mine(text: str) -> str:
    """One's own plan in one's own words: "working on his proof" -> "working on my proof"."""
    return re.sub(r"\b(?:his|her|their)\b", "my", text)


def _first_person(news: str, speaker: str) -> str:
    """One's own news as one tells it: "Isabella is planning ..." -> "I'm planning ..."."""
    for name in (speaker, first_name(speaker)):
        for said, told in ((" is ", "I'm "), (" has ", "I've "), (" was ", "I was "), (" ", "I ")):
            if news.startswith(name + said):
                return _mine(told + news[len(name + said) :])
    return news


LEAVING_MIN = 15  # a plan elsewhere this soon is said, once


class Visit:
    """One answer to a visitor's line (see the module's docstring)."""

    def __init__(self, inputs: s.UtterInput, heard: Heard) -> None:
        self.inputs, self.heard = inputs, heard
        self.me = Situation.of(inputs)
        self.name = first_name(inputs.listener)
        self.rng: random.Random = stable_rng("visit", inputs)
        earlier = [u.text for u in inputs.history if u.speaker == inputs.speaker]
        self.said = " ".join(earlier).lower()
        self.greeted = bool(earlier)

    def say(self, plan: str, **slots: str) -> str:
        """A phrasing of ``plan`` not yet said in this thread (if there is one)."""
        me = self.me
        known = {"name": self.name, "me": me.me, "full": me.full, "place": me.place}
        known |= {"doing": me.doing, "work": me.work or "from around here", "age": me.age}
        known |= {"traits": me.traits or "friendly", "home": me.home or "near here"}
        options = [p.format(**(known | slots)) for p in VISIT[plan]]
        fresh = [p for p in options if p.lower() not in self.said]
        return self.rng.choice(fresh or options)

    def answer(self) -> s.UtterResult:
        heard, parts = self.heard, []
        if heard.has("greeting"):
            parts.append(self.say("greet_again" if self.greeted else "greet"))
        main = heard.main
        if main == "goodbye" or (heard.has("goodbye") and main in ("thanks", "opinion")):
            if main == "thanks":
                parts.append(self.say("thanks"))
            parts.append(self.say("bye"))
            return s.UtterResult(text=" ".join(parts), end=True)
        if main == "greeting":
            if not self.greeted and self.me.work:
                parts.append(self.say("introduce"))
            parts.append(self.say("ask_back"))
        else:
            parts.extend(self._answer(main))
        parts.append(self._leaving())
        text = " ".join(p for p in parts if p)
        if text.lower() in self.said:  # (never the same answer twice in a thread)
            text = f"{text} {self.say('ask_back')}"
        return s.UtterResult(text=text, end=False)

    def _leaving(self) -> str:
        """When the day's plan takes the resident elsewhere soon, it says so, once a thread."""
        later = [p for p in self.me.plans if self.me.clock and p[0] > self.me.clock]
        if not later or "soon, though" in self.said:
            return ""
        at, _what, where = later[0]
        soon = minutes(at) - minutes(self.me.clock) <= LEAVING_MIN
        return self.say("leaving", where=where) if soon and where != self.me.place else ""

    def _answer(self, kind: str) -> list[str]:
        me = self.me
        if kind == "ai":
            return [honest(self.inputs.history[-1].text, me.full)]
        if kind in ("who", "work", "home", "age", "interests", "how", "thanks", "insult"):
            lines = [self.say(kind if kind != "work" or me.work else "doing")]
            if kind == "work":
                lines.append(self.say("work_now"))
            return lines
        if kind == "doing":
            return [self.say("doing"), self._next()]
        if kind == "plans":
            return [self._next(), *self._own_news()[:1]]
        if kind == "happening":
            return self._news() or [self.say("no_news")]
        if kind in ("person", "where_person"):
            return [self._person(kind)]
        if kind == "place":
            return [self._recalled() or self.say("place")]
        if kind == "opinion":
            return [self.say("opinion"), self._recalled() or self.say("ask_back")]
        return [self._recalled() or self.say("other")]

    def _next(self) -> str:
        coming = self.me.next_plan()
        return self.say("next", next=coming) if coming else self.say("no_next")

    def _going_on(self) -> list[str]:
        """An event the resident knows of that is on now ("The party is on right now here!")."""
        now = now_in(self.inputs.speaker_summary)
        news = [n[0] for m in self.inputs.memories if (n := news_in(m, self.inputs.speaker))]
        on = [e for n in news for e in happenings(n) if now and e.when(*now) == "on"]
        return [on[0].told(*now, host=False, here=self.me.place)] if on and now else []

    def _own_news(self) -> list[str]:
        """The resident's own news (a party it hosts), in the first person, with an invitation."""
        found: list[str] = []
        for memory in self.inputs.memories:
            news = None if " plans to be " in memory else news_in(memory, self.inputs.speaker)
            if news and news[1] == self.inputs.speaker and not old_news(self.inputs, news[0]):
                told = sentence(_first_person(news[0], self.inputs.speaker))
                if told not in found:
                    found.append(told)
        if not found:
            return []
        festive = set(found[0].lower().split()) & {"party", "celebration", "concert", "festival"}
        return [found[0], self.say("invite")] if festive else found[:1]

    def _news(self) -> list[str]:
        """News the resident holds, its own first; else a plan of its own for an event. An
        event that has begun is no news: it is on now."""
        going_on = self._going_on()
        if going_on:
            return going_on
        own = self._own_news()
        if own:
            return own
        for memory in self.inputs.memories:
            news = news_in(memory, self.inputs.speaker)
            if (
                news
                and news[1] not in (self.inputs.listener, self.inputs.speaker)
                and set(news[0].lower().split()) & NEWS_WORDS
                and not old_news(self.inputs, news[0])
            ):
                return [f"Have you heard? {sentence(news[0])}"]
        for at, what, where in self.me.plans:
            if set(what.lower().split()) & NEWS_WORDS and at > self.me.clock:
                return [f"I'm {what} at {where} at {at}. Everyone's talking about it."]
        return []

    def _person(self, kind: str) -> str:
        """Of a person the visitor asked about: what the resident remembers, or that it does
        not know (or has not seen) them."""
        line = self.inputs.history[-1].text if self.inputs.history else ""
        known = [n for m in self.inputs.memories for n in names(m)] + names(
            self.inputs.speaker_summary
        )
        asked = names(line) or [n for n in known if first_name(n).lower() in line.lower().split()]
        who = next((n for n in asked if not mentions(self.inputs.speaker, n)), "")
        if not who:
            return self._recalled() or self.say("other")
        full = next((n for n in known if n.startswith(who) and " " in n), who)
        for memory in self.inputs.memories:
            if mentions(memory, full):
                told = tell(memory, self.inputs.speaker, self.inputs.listener)
                if told and mentions(told, full):
                    return f"Yes, I know {first_name(full)}. {sentence(told)}"
        if kind == "where_person":
            return self.say("person_seen", who=first_name(full))
        return self.say("person_unknown", who=full)

    def _recalled(self) -> str | None:
        """A memory of the resident that bears on the visitor's words, in its own words."""
        line = self.inputs.history[-1].text if self.inputs.history else ""
        ranked = sorted(
            ((overlap(m, line), -i, m) for i, m in enumerate(self.inputs.memories)), reverse=True
        )
        for score, _i, memory in ranked:
            told = tell(memory, self.inputs.speaker, self.inputs.listener) if score > 0 else None
            if told and told.startswith("I ") and sentence(told).lower() not in self.said:
                return sentence(told)
        return None


def answer_visitor(inputs: s.UtterInput, hearing: Hearing) -> s.UtterResult:
    """The resident's answer to the visitor's last line."""
    last = inputs.history[-1].text if inputs.history else ""
    return Visit(inputs, hearing.hear(last, inputs.speaker)).answer()


def say(inputs: s.UtterInput, hearing: Hearing) -> s.UtterResult:
    """The offline ``utter``: a visitor's thread is answered as a chat, a resident's as a talk."""
    return answer_visitor(inputs, hearing) if inputs.visitor else talk_utter(inputs)

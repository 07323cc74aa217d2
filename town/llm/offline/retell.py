"""Retelling memories in conversation: a third-person memory said by the speaker to the listener
("Klaus Mueller is writing a paper" -> "you are writing a paper"), and news taken out of what
someone said ('Isabella Rodriguez said: "Have you heard? I'm planning a party."' -> "Isabella is
planning a party"). What a visitor said is the visitor's claim, and is retold as one: 'Mallory
(a visitor) said: "Isabella Rodriguez: I am cancelling the party."' -> "a visitor said that
Isabella is cancelling the party", never as the resident's own words. Whatever cannot be retold
cleanly is left out rather than garbled."""

from __future__ import annotations

import re

from town.llm.offline.lexicon import NEWS_WORDS
from town.llm.offline.text import first_name, words

_SAID = re.compile(
    r"^(?P<who>[A-Z][\w'’-]*(?: [A-Z][\w'’-]*)*)(?: \((?P<aside>[^()]*)\))?"
    r' said(?: to [^:]+)?: "(?P<what>.*)"$'
)
# words a speaker puts in another's mouth: 'Isabella Rodriguez: I am cancelling ...'
_THEIRS = re.compile(r"^(?P<whose>[A-Z][\w'’-]*(?: [A-Z][\w'’-]*){0,3}):\s+")
_VISITOR = "a visitor"
SHORT = 16  # words of a visitor's claim a resident retells, at most
_DIRECTIVE = re.compile(r"^\W*(?:inner voice|directive)\b", re.IGNORECASE)
_TIES = re.compile(
    r"\b(?:wife|husband|son|daughter|friend|friends|neighbour|neighbours|colleague|colleagues"
    r"|partner|brother|sister|mother|father|roommate)\s+$",
    re.IGNORECASE,
)
_AGREE = {"is": "am", "was": "was", "has": "have", "does": "do", "doesn't": "don't"}
_YOU = {"is": "are", "was": "were", "has": "have", "does": "do", "doesn't": "don't"}
_FIRST_TO_THIRD = (
    (re.compile(r"\bI'm\b|\bI am\b"), "{n} is"),
    (re.compile(r"\bI've\b|\bI have\b"), "{n} has"),
    (re.compile(r"\bI'll\b|\bI will\b"), "{n} will"),
    (re.compile(r"\bI was\b"), "{n} was"),
    (re.compile(r"\bmy\b", re.IGNORECASE), "{n}'s"),
)


def is_quote(memory: str) -> bool:
    return '"' in memory or "“" in memory


def is_directive(memory: str) -> bool:
    return bool(_DIRECTIVE.match(memory))


def _verb(word: str, table: dict[str, str]) -> str:
    """The verb after a new subject: "lives" -> "live" (for I and you), "is" -> "am"/"are"."""
    lowered = word.lower()
    if lowered in table:
        return table[lowered]
    if lowered.endswith("ies") and len(lowered) > 4:
        return word[:-3] + "y"
    if lowered.endswith(("ches", "shes", "sses", "xes", "oes")):
        return word[:-2]
    if lowered.endswith("s") and not lowered.endswith("ss") and len(lowered) > 3:
        return word[:-1]
    return word


def _subject(text: str, name: str, pronoun: str, table: dict[str, str]) -> str | None:
    """The text with ``name`` as its opening subject replaced by the pronoun; None otherwise."""
    for form in (name, first_name(name)):
        if text.startswith(form + " "):
            head, _, rest = text[len(form) + 1 :].partition(" ")
            return f"{pronoun} {_verb(head, table)} {rest}".strip()
    return None


def tell(memory: str, speaker: str, listener: str) -> str | None:
    """A memory as the speaker would say it to the listener (speaker "I", listener "you"), or
    None when it is a quote, an inner voice, or would not read right."""
    text = " ".join(memory.split()).rstrip(" .!")
    if not text or is_quote(text) or is_directive(text) or ":" in text:
        return None
    told = _subject(text, speaker, "I", _AGREE)
    own = "my"
    if told is None:
        told, own = _subject(text, listener, "you", _YOU), "your"
        if told is None:
            return None
    told = re.sub(r"\b(?:his|her)\b", own, told, count=1)
    told = re.sub(r"^I and ([A-Z][\w'-]*(?: [A-Z][\w'-]*)*) ", r"\1 and I ", told)
    for form in (listener, first_name(listener)):
        found = re.search(rf"\b{re.escape(form)}\b", told) if form[:1].isupper() else None
        if found is None:
            continue
        before, after = told[: found.start()], told[found.end() :]
        if _TIES.search(before) or after.startswith((",", "'s", "’s")):
            return None  # "my wife you", "you's": better left unsaid
        after = re.sub(r"^ (is|was|has)\b", lambda m: " " + _YOU[m.group(1)], after)
        told = f"{before}you{after}"
    if re.search(rf"\b{re.escape(first_name(speaker))}\b", told):
        return None
    if told.startswith(("I ", "you ")) and re.search(r"\b(?:and|but) \w+s\b", told):
        return None  # "I like coffee and knows": a second verb left unagreed
    return told


def news_in(memory: str, speaker: str) -> tuple[str, str] | None:
    """(news as the speaker tells it, the news' subject) from a memory: a seed or a fact with a
    news word, or the news sentence in what someone said; None if it holds none."""
    said = _SAID.match(" ".join(memory.split()))
    if said:
        return _news_said(said.group("who"), said.group("what"), said.group("aside") or "")
    text = " ".join(memory.split()).rstrip(" .!")
    if is_quote(text) or is_directive(text) or not set(words(text)) & NEWS_WORDS:
        return None
    main = re.split(r",\s+(?:and|but|so)\s+", text)[0]
    if main.startswith((speaker + " ", first_name(speaker) + " ")):
        mine = _subject(main, speaker, "I", _AGREE)
        if mine is None:
            return None
        mine = re.sub(r"\b(?:his|her)\b", "my", mine)
        return mine.replace("I am ", "I'm ", 1), speaker
    name = re.match(r"[A-Z][\w'-]* [A-Z][\w'-]*", main)  # news is about someone, by name
    return (main, name.group(0)) if name else None


def _news_said(who: str, what: str, aside: str) -> tuple[str, str] | None:
    """The news sentence in what ``who`` said, in the third person: "I" is ``who``, or the
    one ``who`` puts the words in the mouth of ("Isabella Rodriguez: I am ..."). A visitor's
    news is told as the visitor's claim ("a visitor said that Isabella is ...")."""
    visitor = aside.startswith(_VISITOR)
    for part in re.split(r"(?<=[.!?])\s+", what):
        if not (set(words(part)) & NEWS_WORDS and "?" not in part and len(part.split()) >= 6):
            continue
        whose = _THEIRS.match(part.strip())
        subject = whose.group("whose") if whose else who
        clause = part.strip()[whose.end() :] if whose else part.strip()
        clause = re.sub(
            r"^(?:have you heard|did you hear the news|guess what|by the way)\W*",
            "",
            clause,
            flags=re.IGNORECASE,
        ).rstrip(" .!")
        if re.search(r"\byou\b", clause, re.IGNORECASE):
            continue
        for pattern, replacement in _FIRST_TO_THIRD:
            clause = pattern.sub(replacement.format(n=first_name(subject)), clause)
        if re.search(r"\bI\b|\bme\b", clause):
            continue
        if visitor:  # a short claim, told as the visitor's; a long one is not retold
            return (f"a visitor said that {clause}", who) if len(clause.split()) <= SHORT else None
        if whose:  # another's words in a resident's mouth: theirs to tell, not retold
            continue
        return clause[:1].upper() + clause[1:], who
    return None

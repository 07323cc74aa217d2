"""Speech asked for as plain text, what small models can say: a short prompt to the resident in
the second person, what does not change first (a server's prefix cache reuses it), the thread
as the chat's turns, the server stopping at the end of the line. What comes back is cleaned (no
tags, JSON, labels, echo of the prompt, or speaking of oneself in the third person) or refused,
and the offline brain says the line instead (docs/llm.md, "Speech a small model can say").
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from town.llm import schemas as s
from town.llm.structured import Message
from town.llm.task import I, Offline, R, Task, _prompt_text
from town.llm.urgency import TALK
from town.text import cut

NOTHING = "(nothing in particular)"

_TAG = re.compile(r"</?[A-Za-z_][^<>]{0,80}>|<\|[^<>]{0,40}\|>")
_FENCE = re.compile(r"```[a-z]*", re.IGNORECASE)
_MARKUP = re.compile(r"[{}<>\[\]]|\bJSON\b|\bINPUT\b|\bTASK:|\bschema\b", re.IGNORECASE)
_PROMPT_WORDS = re.compile(
    r"\b(?:the character|in the first person|as an ai language model|the conversation so far|"
    r"the notes below|as you can see|what you remember|what you know of|what you want|"
    r"your next line|about you:|the conversation has come to an end)",
    re.IGNORECASE,
)
_STAGE = re.compile(r"\([^()]{0,200}\)|\*[^*]{0,200}\*|\[[^\[\]]{0,200}\]")
_SOMEONE = re.compile(r"^(?:[A-Z][\w'’.-]*)(?: [A-Z][\w'’.-]*){0,3}\s*:\s")
_SENTENCE = re.compile(r"[.!?…][\"')\]]*(?=\s|$)")
_VERB = r"(?:is|was|has|had|will|would|can|could|does|did|loves|likes|feels|thinks|[a-z]+s)\b"
_AI_QUESTION = re.compile(
    r"\b(?:are|r)\s+(?:you|u)\b[^?.!]*\b(?:an? )?(?:ai|a\.i\.|bot|robot|chatbot|real|human|"
    r"person|machine|program|computer)\b",
    re.IGNORECASE,
)
_GOODBYE = re.compile(
    r"\b(?:good ?bye|bye|see you|take care|farewell|talk (?:to you )?later|good ?night)\b",
    re.IGNORECASE,
)


def notes(memories: Sequence[str]) -> str:
    return "\n".join(f"- {_flat(m)}" for m in memories) or NOTHING


def _flat(text: str) -> str:
    return " ".join(text.split())


def _label(name: str) -> str:
    first = name.split()[0] if name.split() else name
    names = {re.escape(name), re.escape(first), "You", "Me"}
    return rf"^\s*(?:\*\*)?(?:{'|'.join(sorted(names))})(?:\*\*)?\s*:\s*"


_WORDS_KEYS = ("text", "answer", "message", "reply", "says")


def _from_json(text: str) -> str:
    """The words of a reply that came back as JSON anyway (``{"text": ...}``)."""
    try:
        data = json.loads(text)
    except ValueError:
        raise ValueError("the reply is broken JSON, not speech") from None
    if isinstance(data, dict):
        for key in _WORDS_KEYS:
            if isinstance(found := data.get(key), str):
                return found
    raise ValueError("the reply is JSON without words")


def third_person(text: str, speaker: str) -> bool:
    """Whether the words speak of the speaker by name, as "Mei Lin is proud of her son" does."""
    parts = speaker.split()
    for name in {speaker, parts[0]} if parts else {speaker}:
        if re.search(rf"\b{re.escape(name)}(?:'s|’s|\s+{_VERB})", text):
            return True
    return re.search(rf"\bthis is {re.escape(speaker)}\b", text, re.IGNORECASE) is not None


def clean(text: str, speaker: str, prompt: str = "", limit: int = s.SPEECH_CAP) -> str:
    """The words a model said, cleaned; raises ``ValueError`` for a reply that is no speech."""
    said = text.strip()
    if said.startswith("{"):
        said = _from_json(said)
    said = _FENCE.sub(" ", _TAG.sub(" ", said))
    said = next((line for line in said.splitlines() if line.strip()), "")
    said = re.sub(_label(speaker), "", said)
    said = _flat(_STAGE.sub(" ", said)).strip("\"'“”‘’* ")
    if len(said) < 2 or not any(c.isalpha() for c in said):
        raise ValueError("the reply holds no words")
    if _SOMEONE.match(said) or said.endswith(":"):
        raise ValueError("the reply speaks as someone else, or is a heading")
    said = _whole_sentences(said)
    if _MARKUP.search(said) or _PROMPT_WORDS.search(said):
        raise ValueError("the reply holds markup or the prompt's words")
    if len(said) > 30 and said.casefold() in _flat(prompt).casefold():
        raise ValueError("the reply echoes the prompt")
    if third_person(said, speaker):
        raise ValueError("the reply speaks of the speaker in the third person")
    return cut(said, limit)


def _whole_sentences(said: str) -> str:
    """A reply the cap cut mid-sentence, back to its last whole sentence (if it has one)."""
    if _SENTENCE.search(said[-2:] + " "):
        return said
    ends = [m.end() for m in _SENTENCE.finditer(said)]
    return said[: ends[-1]] if ends else said


def honest(inputs: Any, said: str) -> str:
    """The words, unless they were asked sincerely whether the speaker is an AI and do not say
    so (a small model says "I'm a real person"): then ``ValueError``, and the offline brain
    answers honestly."""
    if isinstance(inputs, s.UtterInput):
        theirs = [u.text for u in inputs.history if u.speaker != inputs.speaker]
        asked = theirs[-1] if theirs else ""
    else:
        asked = str(getattr(inputs, "question", ""))
    if _AI_QUESTION.search(asked) and not re.search(r"\bAI\b|artificial", said):
        raise ValueError("asked whether it is an AI, the reply does not say so")
    return said


def ends_talk(text: str) -> bool:
    """Whether a line takes its leave (the conversation may end with it)."""
    return _GOODBYE.search(text) is not None


def turns(inputs: Any, speaker: str) -> list[Message]:
    """The thread as chat turns, ending with words to answer (the speaker's own as the
    assistant's; a line by a third person says who said it; turns in a row by one side joined)."""
    if isinstance(inputs, s.InterviewInput):
        return [{"role": "user", "content": _flat(inputs.question)}]
    assert isinstance(inputs, s.UtterInput)
    out: list[Message] = []
    for said in inputs.history:
        mine = said.speaker == speaker
        text = _flat(said.text)
        if not mine and said.speaker != inputs.listener:
            text = f"{_flat(said.speaker)}: {text}"
        if out and out[-1]["role"] == ("assistant" if mine else "user"):
            out[-1]["content"] += f" {text}"
        else:
            out.append({"role": "assistant" if mine else "user", "content": text})
    if not out or out[-1]["role"] == "assistant":
        here = f"({_flat(inputs.listener)} is here with you at {_flat(inputs.location)}.)"
        out.append({"role": "user", "content": here})
    return out


def _speech_value(name: str, value: Any, speaker: str) -> str:
    if name == "memories":
        return notes(value)
    if name == "directive":
        return f"A thought on your mind (act on it, never quote it): {value}\n" if value else ""
    if name == "asker":
        return value or "an interviewer"
    return " ".join(str(value).split()) or NOTHING


@dataclass(frozen=True)
class SpeechTask(Task[I, R]):
    """A speaking task: asked for as plain text (this module), not JSON. The system message
    holds the instructions, ``prompt`` (who the resident is) and ``turn`` (the notes and what to
    say); the thread follows as the chat's turns (:func:`turns`)."""

    turn: string.Template = field(default_factory=lambda: string.Template(""))
    speaker_field: str = "speaker"
    reading: Callable[[I, str], R] | None = None
    max_tokens: int = 96
    limit: int = s.SPEECH_CAP

    def render(self, inputs: I) -> list[Message]:
        """The instructions, who speaks, the notes (the system message), then the thread as
        the chat's turns: the others' lines as the user's, the speaker's own as its replies."""
        speaker = str(getattr(inputs, self.speaker_field))
        values = {name: _speech_value(name, value, speaker) for name, value in inputs}
        system = "\n\n".join(
            [self.system, self.prompt.substitute(values).strip(), self.turn.substitute(values)]
        )
        return [{"role": "system", "content": system.strip()}, *turns(inputs, speaker)]

    def parse(self, inputs: I, content: str) -> R:
        """The words cleaned and read into the result; ``ValueError`` for a reply that is no
        speech."""
        assert self.reading is not None
        prompt = "\n".join(m["content"] for m in self.render(inputs))
        said = clean(content, str(getattr(inputs, self.speaker_field)), prompt, self.limit)
        said = honest(inputs, said)
        return self.check(inputs, self.reading(inputs, said))


def speech_task(
    name: str,
    input_model: type[I],
    result_model: type[R],
    reading: Callable[[I, str], R],
    *,
    speaker_field: str,
    max_tokens: int,
    limit: int = s.SPEECH_CAP,
    offline: Offline[I, R] | None = None,
    urgency: int = TALK,
    words: str = "",
) -> SpeechTask[I, R]:
    """A speaking task: ``prompts/<name>.txt`` (who speaks) and ``<name>_turn.txt``."""
    return SpeechTask(
        name,
        input_model,
        result_model,
        _prompt_text("speech_system").strip(),
        string.Template(_prompt_text(name)),
        offline=offline,
        urgency=urgency,
        words=words,
        turn=string.Template(_prompt_text(f"{name}_turn")),
        speaker_field=speaker_field,
        reading=reading,
        max_tokens=max_tokens,
        limit=limit,
    )

"""Wire formats of the fake OpenAI-compatible server: bodies in, bodies out, embeddings."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
import time
from typing import Any

from pydantic import BaseModel

from town.authoring.draft_tasks import DRAFT_TASKS
from town.experiments.tasks import EXPERIMENT_TASKS
from town.features.coaching.tasks import COACHING_TASKS
from town.llm import schemas as s
from town.llm.tasks import INPUT_MARKER, TASK_LINE, TASKS, Task

CONTENT_FAULTS = (
    "prose",
    "no_json",
    "wrong_types",
    "out_of_range",
    "huge",
    "truncated",
    "control_chars",
)
"""Faults in the reply's content, as misbehaving servers and small models write it: the JSON in
prose and a code fence, prose only, numbers and booleans as strings, integers out of range,
50,000-character strings, JSON cut off, raw newlines inside strings."""
FAULTS = (
    "429",
    "500",
    "hang",
    "malformed",
    "wrong_shape",
    "reject_json_schema",
    "reject_json_schema_500",
    "empty_choices",
    "401",
    "404",
    "overrun",
    "interrupted",
    *CONTENT_FAULTS,
)
"""Every fault kind that can be queued through ``POST /_fake/faults`` ("interrupted": a
streamed reply ends halfway with no finish reason, as llama-cpp-python's server ends a stream
when another request comes in)."""
HUGE = 50_000
OVERRUN_TOKENS = 12_513
"""The length of a reply with the ``overrun`` fault, whatever its ``max_tokens`` said."""
RANDOM_FAULTS = ("429", "500", "malformed", "wrong_shape")
"""The transient faults drawn at random with ``fault_rate``."""

KNOWN_TASKS = {t.name: t for t in (*TASKS, *EXPERIMENT_TASKS, *COACHING_TASKS, *DRAFT_TASKS)}
"""Every task the server answers, as the wire names it: the town's, the experiments', the
features' and the town drafts' (``bottown town draft``)."""
_TASK_LINE = re.compile(rf"^{re.escape(TASK_LINE)}(\w+)\s*$", re.MULTILINE)
_TOKEN = re.compile(r"[a-z0-9]+")


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def message_text(message: Any) -> str:
    """The text of a chat message, whether its content is a string or a list of parts."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _messages(body: dict[str, Any]) -> list[Any]:
    messages = body.get("messages")
    return messages if isinstance(messages, list) else []


def task_of(body: dict[str, Any]) -> Task[Any, Any] | None:
    """The task asked for: the json_schema's name, else the ``TASK:`` line of a system message."""
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        schema = response_format.get("json_schema")
        name = schema.get("name") if isinstance(schema, dict) else None
        if isinstance(name, str) and name in KNOWN_TASKS:
            return KNOWN_TASKS[name]
    for message in _messages(body):
        if isinstance(message, dict) and message.get("role") in ("system", "developer"):
            found = _TASK_LINE.search(message_text(message))
            if found and found.group(1) in KNOWN_TASKS:
                return KNOWN_TASKS[found.group(1)]
    return None


def schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a request asks its reply to match (json_schema or json_object mode)."""
    response_format = body.get("response_format")
    if not isinstance(response_format, dict):
        return None
    found = response_format.get("schema")
    if response_format.get("type") == "json_schema":
        named = response_format.get("json_schema")
        found = named.get("schema") if isinstance(named, dict) else None
    return found if isinstance(found, dict) else None


def least(schema: Any) -> Any:
    """The smallest value ``schema`` allows (its first choice, its fewest items): the fake's
    answer to a task it does not know, as a grammar engine would hold a model to the schema."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    if "anyOf" in schema:
        options = [o for o in schema["anyOf"] if isinstance(o, dict)]
        return least(next((o for o in options if o.get("type") != "null"), {"type": "null"}))
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: least(props[name]) for name in schema.get("required", list(props))}
    if kind == "array":
        return [least(schema.get("items")) for _ in range(int(schema.get("minItems", 0)))]
    if kind == "string":
        return "ok".ljust(int(schema.get("minLength", 0)), "k")
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    return False if kind == "boolean" else None


def inputs_of(task: Task[Any, Any], body: dict[str, Any]) -> BaseModel:
    """The task's inputs, from the last user message holding an ``INPUT JSON:`` block."""
    for message in reversed(_messages(body)):
        if isinstance(message, dict) and message.get("role") == "user":
            text = message_text(message)
            if INPUT_MARKER in text:
                data = json.loads(text.rsplit(INPUT_MARKER, 1)[1])
                inputs: BaseModel = task.input_model.model_validate(data)
                return inputs
    raise ValueError("no user message holds an INPUT JSON block")


_YOU_ARE = re.compile(r"^You are (?P<name>[^.\n]+)\. About you: (?P<summary>.*)$", re.MULTILINE)
_WHERE = re.compile(r"^You are at (?P<where>.+), talking with (?P<who>.+)\.$", re.MULTILINE)
_KNOWN = re.compile(r"^What you know of .+?: (?P<known>.*)$", re.MULTILINE)
_NOTES = re.compile(r"^What you remember[^\n]*:\n(?P<notes>(?:- .*\n?|\(nothing.*\n?)*)", re.M)
_THOUGHT = re.compile(r"^A thought on your mind \(act on it, never quote it\): (?P<it>.+)$", re.M)
_ASKER = re.compile(r"^You are asked by (?P<asker>[^\n]+?)\. Answer", re.MULTILINE)
_THIRD = re.compile(r"^(?P<who>[A-Z][^:]{0,60}): (?P<text>.+)$")
_NOTHING = "(nothing in particular)"


def _found(pattern: re.Pattern[str], text: str, group: str) -> str:
    match = pattern.search(text)
    value = match[group] if match else ""
    return "" if value == _NOTHING else value


def _thread(turns: list[Any], speaker: str, listener: str) -> list[s.Utterance]:
    history = []
    for turn in turns:
        text = message_text(turn)
        if turn.get("role") == "assistant":
            history.append(s.Utterance(speaker=speaker, text=text))
        elif not text.startswith("("):  # "(Klaus is here with you ...)": no one's words
            third = _THIRD.match(text)
            who, said = (third["who"], third["text"]) if third else (listener, text)
            history.append(s.Utterance(speaker=who, text=said))
    return history


def speech_inputs(body: dict[str, Any]) -> tuple[Task[Any, Any], BaseModel] | None:
    """The task and inputs of a plain-text speech request (``town.llm.speech``'s prompts, no
    response format), read back from its prose and turns: an interview's or a conversation's."""
    messages = _messages(body)
    if body.get("response_format") is not None or not messages:
        return None
    system = message_text(messages[0]) if messages[0].get("role") == "system" else ""
    if (me := _YOU_ARE.search(system)) is None:
        return None
    name, summary = me["name"], me["summary"]
    notes = _found(_NOTES, system, "notes")
    memories = [line[2:] for line in notes.splitlines() if line.startswith("- ")]
    if (asked := _ASKER.search(system)) is not None:
        asker = None if asked["asker"] == "an interviewer" else asked["asker"]
        question = message_text(messages[-1])
        inputs: BaseModel = s.InterviewInput(
            resident=name, summary=summary, memories=memories, question=question, asker=asker
        )
        return KNOWN_TASKS["interview"], inputs
    listener = _found(_WHERE, system, "who")
    inputs = s.UtterInput(
        speaker=name,
        listener=listener,
        speaker_summary=summary,
        relationship=_found(_KNOWN, system, "known"),
        memories=memories,
        history=_thread(messages[1:], name, listener),
        location=_found(_WHERE, system, "where"),
        directive=_found(_THOUGHT, system, "it") or None,
    )
    return KNOWN_TASKS["utter"], inputs


def prompt_tokens(body: dict[str, Any]) -> int:
    return estimate_tokens("".join(message_text(m) for m in _messages(body)))


def prompt_text(body: dict[str, Any]) -> str:
    return "".join(message_text(m) for m in _messages(body))


def cached_tokens(prompt: str, earlier: list[str]) -> int:
    """The prompt's tokens a prefix cache holds: its longest common start with a prompt seen
    lately (llama.cpp, vLLM and OpenAI reuse a cached prefix so)."""
    best = 0
    for seen in earlier:
        same = next(
            (i for i, (a, b) in enumerate(zip(prompt, seen, strict=False)) if a != b),
            min(len(prompt), len(seen)),
        )
        best = max(best, same)
    return best // 4


def completion_body(
    model: str, number: int, content: str, prompt: int, cached: int = 0
) -> dict[str, Any]:
    completion = estimate_tokens(content)
    return {
        "id": f"chatcmpl-fake-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": min(cached, prompt)},
        },
    }


STREAM_PIECES = 8
"""The pieces a streamed reply's content comes in, spread over the latency (a server's tokens)."""
PIECE_CHARS = 64
"""The most a piece holds (about 16 tokens): a long reply comes in more pieces, as a server
writes its tokens a few at a time."""


def stream_chunks(
    reply: dict[str, Any], *, usage: bool, interrupted: bool = False
) -> list[dict[str, Any]]:
    """A completion (:func:`completion_body`) as the chunks of a stream: the role, the content
    in ``STREAM_PIECES`` pieces (more for a long one), the finish reason, and the usage in a
    last chunk of no choices when ``stream_options.include_usage`` asks for it.
    ``interrupted``: the first half only."""
    head = {k: reply.get(k) for k in ("id", "created", "model", "system_fingerprint")}
    head["object"] = "chat.completion.chunk"

    def chunk(delta: dict[str, Any] | None, finish: str | None = None) -> dict[str, Any]:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        return {**head, "choices": choices if reply["choices"] else []}

    content = (reply["choices"][0]["message"].get("content") if reply["choices"] else "") or ""
    size = min(max(1, -(-len(content) // STREAM_PIECES)), PIECE_CHARS)
    pieces = [content[n : n + size] for n in range(0, len(content), size)]
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in pieces]
    if interrupted:
        return chunks[: 1 + len(pieces) // 2]
    chunks.append(chunk({}, "stop"))
    if usage and "usage" in reply:
        chunks.append({**head, "choices": [], "usage": reply["usage"]})
    return chunks


def chunk_text(chunk: dict[str, Any]) -> str:
    """The content a stream's chunk carries (none for the role, the finish and the usage)."""
    choices = chunk.get("choices") or [{}]
    return str(choices[0].get("delta", {}).get("content") or "")


def _map(value: Any, fault: str) -> Any:
    if isinstance(value, dict):
        return {k: _map(v, fault) for k, v in value.items()}
    if isinstance(value, list):
        return [_map(v, fault) for v in value]
    if isinstance(value, bool):
        return str(value).lower() if fault == "wrong_types" else value
    if isinstance(value, int):
        if fault == "wrong_types":
            return str(value)
        return value + 100 if fault == "out_of_range" else value
    if isinstance(value, str):
        if fault == "huge":
            return (value + " " + "and so on " * HUGE)[:HUGE]
        if fault == "control_chars":
            return value + "\n\tand more"
    return value


def saying(says: str, content: str) -> str:
    """A reply with ``says`` put before each of its texts: each string of a JSON reply (a
    string an enum closes then fails the schema, as a model's would), or the speech."""
    try:
        found = json.loads(content)
    except ValueError:
        found = None
    if not isinstance(found, dict | list):
        return f"{says} {content}"
    return json.dumps(_before(found, says), ensure_ascii=False)


def _before(value: Any, says: str) -> Any:
    if isinstance(value, dict):
        return {k: _before(v, says) for k, v in value.items()}
    if isinstance(value, list):
        return [_before(v, says) for v in value]
    return f"{says} {value}" if isinstance(value, str) else value


def distort(fault: str, content: str) -> str:
    """A reply's JSON content as a content fault (:data:`CONTENT_FAULTS`) writes it."""
    if fault == "prose":
        return f"Sure! Here is the JSON you asked for:\n```json\n{content}\n```\nAnything else?"
    if fault == "no_json":
        return "I would rather just chat about it: it sounds like a lovely day."
    if fault == "truncated":
        return content[: len(content) // 2]
    shown = json.dumps(_map(json.loads(content), fault), ensure_ascii=False)
    if fault == "control_chars":  # raw control characters inside the strings
        return shown.replace("\\n", "\n").replace("\\t", "\t")
    return shown


def error_body(
    message: str, kind: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def embed(text: str, dim: int) -> list[float]:
    """A hashed bag of words: each word adds +-1 to one of ``dim`` slots; unit length."""
    vector = [0.0] * dim
    for token in _TOKEN.findall(text.lower()):
        digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
        slot = int.from_bytes(digest[:4], "big") % dim
        vector[slot] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0.0:
        vector[0] = 1.0
        return vector
    return [v / norm for v in vector]


def embeddings_body(model: str, texts: list[str], dim: int, encoding: str) -> dict[str, Any]:
    data: list[dict[str, Any]] = []
    for index, text in enumerate(texts):
        vector = embed(text, dim)
        encoded: list[float] | str = vector
        if encoding == "base64":
            encoded = base64.b64encode(struct.pack(f"<{dim}f", *vector)).decode("ascii")
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = sum(estimate_tokens(t) for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def embedding_texts(body: dict[str, Any]) -> list[str]:
    """The texts to embed: a string, a list of strings, or token lists (read as numbers)."""
    given = body.get("input")
    if isinstance(given, str):
        return [given]
    if isinstance(given, list) and given:
        if all(isinstance(t, str) for t in given):
            return list(given)
        if all(isinstance(t, int) for t in given):
            return [" ".join(str(t) for t in given)]
        if all(isinstance(t, list) for t in given):
            return [" ".join(str(x) for x in t) for t in given]
    raise ValueError("input must be a string or a list of strings")

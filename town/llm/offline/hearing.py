"""What a visitor's line is (a greeting, a question about the resident, about now, about the
town, thanks, a goodbye ...), heard by meaning.

Each kind has example lines and keyword rules in ``lexicon.toml`` ([heard.<kind>]). A sentence
is embedded by the town's sentence embedder and compared with every example; the kinds whose
nearest example comes within ``MARGIN`` of the best are in the running, and among them one whose
keyword rule matches wins (the tie-break), else the nearest. Below ``FLOOR``, with no keyword,
a sentence is "other". The examples are embedded once per embedder, on the first line heard.
With the hash embedder (bag of words) the same rule holds; it is as deterministic as the
embedder is.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import numpy as np

from town.llm.embedders import Embedder, HashEmbedder
from town.llm.offline.lexicon import HEARD

MARGIN = 0.08  # kinds this close to the nearest are a tie, broken by the keyword rules
FLOOR = 0.3  # a nearest example farther than this says nothing, without a keyword
OTHER = "other"
QUESTIONS = (  # kinds that ask something, the most telling first
    "ai",
    "who",
    "work",
    "home",
    "age",
    "interests",
    "where_person",
    "person",
    "happening",
    "plans",
    "doing",
    "place",
    "how",
)
_SENTENCE = re.compile(r"[^.!?]+[.!?]*")


@dataclass(frozen=True)
class Heard:
    """The kinds of a visitor's line, one per sentence in order (a line may greet and ask)."""

    kinds: tuple[str, ...]

    def has(self, kind: str) -> bool:
        return kind in self.kinds

    @property
    def main(self) -> str:
        """What the line is mainly: the most telling question, else its last kind."""
        asked = [k for k in QUESTIONS if k in self.kinds]
        if asked:
            return asked[0]
        rest = [k for k in self.kinds if k != "greeting"]
        return rest[-1] if rest else (self.kinds[-1] if self.kinds else OTHER)


class Hearing:
    """Recognises visitors' lines with one embedder (the town's, or the hash embedder)."""

    def __init__(self, embedder: Embedder | None = None) -> None:
        self.embedder: Embedder = embedder if embedder is not None else HashEmbedder()
        self._kinds = [kind for kind, lines in HEARD.items() for _ in lines.examples]
        self._examples: np.ndarray | None = None
        self._lock = threading.Lock()

    def _example_vectors(self) -> np.ndarray:
        with self._lock:
            if self._examples is None:
                texts = [line for lines in HEARD.values() for line in lines.examples]
                self._examples = np.asarray(self.embedder.embed(texts), dtype=np.float32)
            return self._examples

    def kind(self, sentence: str) -> str:
        """The kind of one sentence (see the module's docstring)."""
        text = " ".join(sentence.split())
        if not re.search(r"\w", text):
            return OTHER
        vector = np.asarray(self.embedder.embed([text]), dtype=np.float32)[0]
        scores = self._example_vectors() @ vector
        nearest: dict[str, float] = {}
        for kind, score in zip(self._kinds, scores.tolist(), strict=True):
            nearest[kind] = max(nearest.get(kind, -1.0), score)
        best_kind = max(nearest, key=lambda k: nearest[k])
        best = nearest[best_kind]
        keyed = [k for k, lines in HEARD.items() if lines.matches(text)]
        running = [k for k in keyed if nearest[k] >= best - MARGIN]
        if running:
            return max(running, key=lambda k: nearest[k])
        if best < FLOOR:
            return keyed[0] if keyed else OTHER
        return best_kind

    @staticmethod
    def listens(inputs: object) -> bool:
        """Whether answering these inputs hears a visitor's line (and so embeds it)."""
        return getattr(inputs, "visitor", False) is True

    def hear(self, line: str, resident: str = "") -> Heard:
        """The kinds of a visitor's line, sentence by sentence; the resident's own name (a
        vocative) is left out first, as it tells nothing of the kind."""
        for name in (resident, resident.split()[0] if resident else ""):
            if name:
                line = re.sub(rf"\b{re.escape(name)}\b,?", "", line, flags=re.IGNORECASE)
        kinds: list[str] = []
        for part in _SENTENCE.findall(line):
            found = self.kind(part)
            if found != OTHER or not kinds:
                kinds.append(found)
        if len(kinds) > 1 and OTHER in kinds:
            kinds = [k for k in kinds if k != OTHER]
        return Heard(tuple(dict.fromkeys(kinds)) or (OTHER,))

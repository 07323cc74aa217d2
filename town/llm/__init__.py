"""The town's single way to think: tasks, the offline brain, the model's brain as one chain.

``await brain.run(REACT, ReactInput(...), resident="Isabella Rodriguez")`` works the same with
every :class:`Brain`: the chain :func:`town.llm.chain.compose` builds (report, fallback, the
:class:`LLMGateway`), the :class:`OfflineBrain` or a :class:`ScriptedBrain` in tests. The fake
OpenAI-compatible server is :mod:`standins.llm.server`, outside the town.
"""

from town.llm.gateway import LLMGateway
from town.llm.port import Brain, OfflineBrain, ScriptedBrain, ScriptedCall
from town.llm.tasks import (
    CHOOSE_LOCATION,
    DECOMPOSE,
    EMOJI,
    INTERVIEW,
    OBJECT_STATE,
    PLAN_DAY,
    RATE_IMPORTANCE,
    REACT,
    REFLECT_INSIGHTS,
    REFLECT_QUESTIONS,
    SUMMARIZE,
    TASKS,
    UTTER,
    Task,
)
from town.llm.usage import Budget, TokenBudget, UsageCount, UsageRecorder, UsageTally

__all__ = [
    "CHOOSE_LOCATION",
    "DECOMPOSE",
    "EMOJI",
    "INTERVIEW",
    "OBJECT_STATE",
    "PLAN_DAY",
    "RATE_IMPORTANCE",
    "REACT",
    "REFLECT_INSIGHTS",
    "REFLECT_QUESTIONS",
    "SUMMARIZE",
    "TASKS",
    "UTTER",
    "Brain",
    "Budget",
    "LLMGateway",
    "OfflineBrain",
    "ScriptedBrain",
    "ScriptedCall",
    "Task",
    "TokenBudget",
    "UsageCount",
    "UsageRecorder",
    "UsageTally",
]

"""The town's single way to think: tasks, the offline brain, the model's brain as one chain.

``await brain.run(REACT, ReactInput(...), resident="Isabella Rodriguez")`` works the same with
every :class:`~town.llm.port.Brain`: the chain :func:`town.llm.chain.compose` builds (report,
fallback, the :class:`~town.llm.gateway.LLMGateway`), the :class:`~town.llm.port.OfflineBrain`
or the suite's scripted brain (``tests/fakes/brain.py``). The fake OpenAI-compatible server is
:mod:`standins.llm.server`, outside the town.
"""

"""The gather experiment of Takata et al.: identical LLM agents on a torus, a goal, messages.

A ``size`` x ``size`` field with periodic borders, the goal at ``goal``. Each step:

1. every agent writes a message from its id, its position, the mission and everything it
   received in the step before (``No Messages`` when nothing);
2. messages reach the agents within reception range (a square: ``|dx| <= r`` and ``|dy| <= r``
   in torus distance, i.e. Chebyshev distance ``<= r``), and an agent within range of the goal
   receives ``You found the GOAL (50, 50)!``;
3. every agent chooses a move (``up``, ``down``, ``left``, ``right``, ``stay``), parsed from its
   free text: the first direction word; none -> ``stay``, counted as unparsed;
4. all agents move at once (``up`` is y + 1, ``right`` is x + 1, wrapping around).

``field`` holds the setting and the torus, ``messages`` delivery and move parsing, ``run`` the
steps (the agents' thoughts within a step run concurrently through the brain port), ``log`` one
JSON line per agent and step, ``memories`` the memory streams of ``GatherConfig.memory`` (the
next step the authors proposed); ``analysis``, ``tables`` and ``plots`` what a run shows.
"""

"""The society measures of Park et al. (section 7): information diffusion, relationship density,
party attendance and hallucinated knowledge, measured on a town after a simulation.

Every resident is interviewed (``town.inputs.query.interview``: nothing changes in the town but the
memories' last-access times) about each seeded fact and about each other resident; each answer is
judged yes or no (the ``judge_knows`` task through the brain); each yes is checked against the
resident's memory stream. The start of the run is read from the seed memories, the course of the
run from the memories' creation times and the replay file's events.

Definitions (kept simple and stated so results can be compared):

- a resident *knows a fact at the start* when one of its seed memories holds the fact's phrase;
- a resident *knows another at the start* when one of its seed memories names the other (full
  name, or first name as a whole word);
- a *yes* is *supported* when some memory of the resident names one of the fact's keywords (or,
  for a person, the other's name); an unsupported yes is a *hallucination*;
- a memory *mentions a fact* (for the curve over time) when it names a keyword and a topic word
  of the fact's question (``mayor``, ``party`` ...), or holds the fact's phrase;
- *knowing at the end* is a supported yes; an edge of the relationship graph is mutual knowing;
- *invited* residents are those who knew the event's fact at the end (the host left out), as the
  paper counts its 12 invited; *attended* means being in the event's area during its hours
  (from the replay's ``moved`` and ``action`` events, and conversations held there).
"""

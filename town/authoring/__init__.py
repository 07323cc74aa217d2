"""Writing a town of one's own: a commented scaffold (``scaffold``), a draft by the LLM
(``drafting``), a one-screen summary of a checked folder (``summary``), and the changes an
edited folder makes to a living town (``changes``)."""

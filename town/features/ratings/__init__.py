"""Real people rate the residents where they talk: members' reactions to residents' messages,
stored against the message (``reactions``), read as up, down or other (``moods``), heard by the
resident as an observation, and counted by ``town.experiments.live`` (``bottown eval live``).
A live A/B of two models (``split``) records which model made each message."""

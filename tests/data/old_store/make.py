"""Makes ``store-0009.db``: a database written by an earlier bottown (schema revision 0009), with
a town, its residents, memories, an outbox and a visitor's chat, for the upgrade test.

Run from the repository's root: ``.venv/bin/python tests/data/old_store/make.py``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from alembic import command

from town.store.db import migrations_config

REVISION = "0009"
FILE = Path(__file__).with_name(f"store-{REVISION}.db")
ROWS = [
    "INSERT INTO town VALUES (1, 'oldtown', 'smallville', '2023-02-13 09:00:00', 10, 0, "
    "'2023-02-01 12:00:00', NULL, NULL, 7)",
    "INSERT INTO resident VALUES (1, 1, 'Isabella Rodriguez', '{\"age\": 34}', "
    "'Hobbs Cafe: counter', 'serving coffee', '☕', 'runs the cafe', NULL, '{}')",
    "INSERT INTO resident VALUES (2, 1, 'Klaus Mueller', '{\"age\": 20}', "
    "'Hobbs Cafe: table', 'reading', '📖', 'a student', NULL, '{}')",
    "INSERT INTO memory VALUES (1, 1, 'seed', 'Isabella plans a Valentine''s Day party', "
    "'2023-02-13 07:00:00', '2023-02-13 08:00:00', 8, '[]', 0)",
    "INSERT INTO memory VALUES (2, 1, 'observation', 'Klaus is reading at a table', "
    "'2023-02-13 08:30:00', '2023-02-13 08:30:00', 3, '[]', 0)",
    "INSERT INTO memory VALUES (3, 2, 'reflection', 'Isabella is a warm host', "
    "'2023-02-13 08:50:00', '2023-02-13 08:50:00', 6, '[1, 2]', 1)",
    "INSERT INTO outboxevent VALUES (1, 1, 'Hobbs Cafe', 'said', '{\"text\": \"Good morning!\"}', "
    "'2023-02-13 08:40:00', 'oldtown:1', '2023-02-01 12:01:00', '2023-02-01 12:01:05')",
    "INSERT INTO outboxevent VALUES (2, 1, 'Hobbs Cafe', 'action', '{\"text\": \"reading\"}', "
    "'2023-02-13 08:50:00', 'oldtown:2', '2023-02-01 12:02:00', NULL)",
    "INSERT INTO visitor VALUES (1, 1, 'web', 'alice', 'Alice', 'a reporter', "
    "'2023-02-01 12:00:30')",
    "INSERT INTO chatline VALUES (1, 1, 'Hobbs Cafe', 'Alice', 'visitor', 'Isabella Rodriguez', "
    "'web:alice', 'web', 1, 'Hi Isabella!', '2023-02-13 08:45:00', '2023-02-01 12:01:30')",
]


def make() -> None:
    FILE.unlink(missing_ok=True)
    cfg = migrations_config()
    cfg.set_main_option("sqlalchemy.url", f"sqlite:///{FILE}")
    command.upgrade(cfg, REVISION)
    with sqlite3.connect(FILE) as db:
        for row in ROWS:
            db.execute(row)
    db.execute("VACUUM")
    db.close()


if __name__ == "__main__":
    make()

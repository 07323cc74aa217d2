"""what visitors and residents say to each other becomes rows of its own (chatline); the
audit log goes back to recording only. Visitors' words and residents' answers already in the
audit log are copied over under the same ids, so each resident's place in what it has heard
(its state's "heard") still counts in the new table.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28 11:30:00.000000
"""

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: Sequence[str] | None = None
depends_on: Sequence[str] | None = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("chatline"):
        return  # (a database stamped back to an older revision by hand)
    op.create_table(
        "chatline",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("town_id", sa.Integer(), nullable=False),
        sa.Column("area", sa.String(length=300), nullable=False),
        sa.Column("speaker", sa.String(length=80), nullable=False),
        sa.Column("kind", sa.String(length=10), nullable=False),
        sa.Column("addressee", sa.String(length=80), nullable=False),
        sa.Column("thread", sa.String(length=130), nullable=False),
        sa.Column("platform", sa.String(length=20), nullable=False),
        sa.Column("heard", sa.Boolean(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("game_time", sa.DateTime(), nullable=False),
        sa.Column("wall_time", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["town_id"], ["town.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_chatline_town_area_thread", "chatline", ["town_id", "area", "thread", "id"])
    op.create_index("ix_chatline_town_game_time", "chatline", ["town_id", "game_time"])
    _copy_from_the_audit_log()


def downgrade() -> None:
    op.drop_index("ix_chatline_town_game_time", table_name="chatline")
    op.drop_index("ix_chatline_town_area_thread", table_name="chatline")
    op.drop_table("chatline")


def _copy_from_the_audit_log() -> None:
    """Visitors' words ("say", "say:limited": who is ``Name (platform:user)``) and residents'
    answers ("reply": text ``(to Name) words``) as chat lines with the audit rows' ids; then
    each resident's "heard" (an audit row id) is brought down to the newest line it covers."""
    conn = op.get_bind()
    rows = conn.execute(
        sa.text(
            "select id, town_id, kind, platform, channel, who, text, game_time, wall_time "
            "from auditentry where kind in ('say', 'say:limited', 'reply') order by id"
        )
    ).all()
    threads: dict[tuple[int, str, str], str] = {}  # (town, area, visitor's name) -> thread
    lines: list[dict[str, Any]] = []
    for row in rows:
        line = {"id": row.id, "town_id": row.town_id, "area": row.channel[:300]}
        line.update(game_time=row.game_time, wall_time=row.wall_time, platform=row.platform)
        if row.kind == "reply":
            to, words = "", row.text
            if row.text.startswith("(to ") and ") " in row.text:
                to, _, words = row.text[4:].partition(") ")
            thread = threads.get((row.town_id, row.channel, to), f"{row.platform}:{to}")
            line.update(speaker=row.who[:80], kind="resident", addressee=to[:80], text=words)
            line.update(thread=thread[:130], heard=True)
        else:
            name, paren, rest = row.who.rpartition(" (")
            if not (paren and row.who.endswith(")")):
                name, rest = row.who, row.who + ")"
            thread = rest[:-1][:130]
            threads[(row.town_id, row.channel, name)] = thread
            line.update(speaker=name[:80], kind="visitor", addressee="", text=row.text)
            line.update(thread=thread, heard=row.kind == "say")
        lines.append(line)
    if lines:
        columns = ", ".join(lines[0])
        values = ", ".join(f":{key}" for key in lines[0])
        conn.execute(sa.text(f"insert into chatline ({columns}) values ({values})"), lines)
        if conn.dialect.name == "postgresql":
            conn.execute(
                sa.text(
                    "select setval(pg_get_serial_sequence('chatline', 'id'), "
                    "(select max(id) from chatline))"
                )
            )
    newest = max((line["id"] for line in lines), default=0)
    update = sa.text("update resident set state = :state where id = :id").bindparams(
        sa.bindparam("state", type_=sa.JSON)
    )
    for resident_id, state in conn.execute(sa.text("select id, state from resident")).all():
        found = json.loads(state) if isinstance(state, str) else dict(state or {})
        if int(found.get("heard", 0) or 0) > newest:
            found["heard"] = newest
            conn.execute(update, {"state": found, "id": resident_id})

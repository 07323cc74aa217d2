"""ids made in Python and inputs that wait for the next tick: a tick thinks with no database
transaction open, so its new memories, plan items and conversations take their ids from
blocks reserved in ``idcounter``; an inner voice whispered meanwhile waits in
``pendinginput`` for the next tick instead of writing over the tick's work

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28 11:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: Sequence[str] | None = None
depends_on: Sequence[str] | None = None

TABLES = ("memory", "planitem", "conversation")


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("idcounter"):  # (a database set back by hand)
        return
    counter = op.create_table(
        "idcounter",
        sa.Column("name", sa.String(length=40), nullable=False),
        sa.Column("next_id", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.bulk_insert(counter, [{"name": name, "next_id": 1} for name in TABLES])
    for name in TABLES:  # (the next id past every row already there)
        op.execute(
            f"UPDATE idcounter SET next_id = (SELECT COALESCE(MAX(id), 0) + 1 FROM {name}) "
            f"WHERE name = '{name}'"
        )
    op.create_table(
        "pendinginput",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("town_id", sa.Integer(), nullable=False),
        sa.Column("resident", sa.String(length=80), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["town_id"], ["town.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("pendinginput", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_pendinginput_town_id"), ["town_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("pendinginput", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pendinginput_town_id"))
    op.drop_table("pendinginput")
    op.drop_table("idcounter")

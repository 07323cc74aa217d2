"""reactions: members' reactions to residents' messages, the live believability figures

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28 12:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: Sequence[str] | None = None
depends_on: Sequence[str] | None = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("reaction"):
        return  # a database re-run from an older revision mark (the store's tests do)
    op.create_table(
        "reaction",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("town_id", sa.Integer(), nullable=False),
        sa.Column("outbox_id", sa.Integer(), nullable=False),
        sa.Column("platform", sa.String(length=20), nullable=False),
        sa.Column("member", sa.String(length=64), nullable=False),
        sa.Column("emoji", sa.String(length=80), nullable=False),
        sa.Column("resident", sa.String(length=80), nullable=False),
        sa.Column("task", sa.String(length=20), nullable=False),
        sa.Column("model", sa.String(length=120), nullable=False),
        sa.Column("place", sa.String(length=300), nullable=False),
        sa.Column("game_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("wall_time", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["outbox_id"], ["outboxevent.id"]),
        sa.ForeignKeyConstraint(["town_id"], ["town.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("outbox_id", "platform", "member", "emoji"),
    )
    with op.batch_alter_table("reaction", schema=None) as batch_op:
        batch_op.create_index("ix_reaction_town_wall", ["town_id", "wall_time"], unique=False)
        batch_op.create_index(batch_op.f("ix_reaction_outbox_id"), ["outbox_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("reaction", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_reaction_outbox_id"))
        batch_op.drop_index("ix_reaction_town_wall")
    op.drop_table("reaction")

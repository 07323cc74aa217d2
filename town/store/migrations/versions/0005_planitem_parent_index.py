"""plan items indexed by parent: a replanning deletes a resident's stale items by their parent,
and deleting an item has SQLite look for items under it; unindexed, both read every plan item
the town ever made

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 05:20:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: Sequence[str] | None = None
depends_on: Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("planitem", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_planitem_parent_id"), ["parent_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("planitem", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_planitem_parent_id"))

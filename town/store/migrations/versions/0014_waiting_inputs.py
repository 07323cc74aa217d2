"""waiting inputs: what a gateway process heard members do, for the process that runs the town

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02 04:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: Sequence[str] | None = None
depends_on: Sequence[str] | None = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("waitinginput"):
        return  # a database re-run from an older revision mark (the store's tests do)
    op.create_table(
        "waitinginput",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("town_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["town_id"], ["town.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_waitinginput_town_id", "waitinginput", ["town_id"])


def downgrade() -> None:
    op.drop_index("ix_waitinginput_town_id", table_name="waitinginput")
    op.drop_table("waitinginput")

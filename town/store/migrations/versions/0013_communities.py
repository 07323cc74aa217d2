"""communities: the servers and workspaces that each founded a town with the shared bot

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 01:45:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: Sequence[str] | None = None
depends_on: Sequence[str] | None = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("community"):
        return  # a database re-run from an older revision mark (the store's tests do)
    op.create_table(
        "community",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("platform", sa.String(length=20), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("town_id", sa.Integer(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["town_id"], ["town.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("platform", "key"),
        sa.UniqueConstraint("town_id"),
    )


def downgrade() -> None:
    op.drop_table("community")

"""members decide what the town keeps of them: forget orders (recorded before a forget begins),
muted members, and admins' per-channel switches (quiet, closed)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28 11:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: Sequence[str] | None = None
depends_on: Sequence[str] | None = None


def upgrade() -> None:
    made = set(sa.inspect(op.get_bind()).get_table_names())  # (a database set back re-runs it)
    if "forgetorder" in made:
        return
    op.create_table(
        "forgetorder",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("town_id", sa.Integer(), sa.ForeignKey("town.id"), nullable=False),
        sa.Column("platform", sa.String(length=20), nullable=False),
        sa.Column("platform_user_id", sa.String(length=100), nullable=False),
        sa.Column("names", sa.JSON(), nullable=False),
        sa.Column("phrases", sa.JSON(), nullable=False),
        sa.Column("reason", sa.String(length=20), nullable=False),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_forgetorder_town_id", "forgetorder", ["town_id"])
    op.create_table(
        "mutedmember",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("town_id", sa.Integer(), sa.ForeignKey("town.id"), nullable=False),
        sa.Column("platform", sa.String(length=20), nullable=False),
        sa.Column("platform_user_id", sa.String(length=100), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("town_id", "platform", "platform_user_id"),
    )
    op.create_index("ix_mutedmember_town_id", "mutedmember", ["town_id"])
    op.create_table(
        "channelswitch",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("town_id", sa.Integer(), sa.ForeignKey("town.id"), nullable=False),
        sa.Column("area", sa.String(length=300), nullable=False),
        sa.Column("mode", sa.String(length=10), nullable=False),
        sa.UniqueConstraint("town_id", "area"),
    )
    op.create_index("ix_channelswitch_town_id", "channelswitch", ["town_id"])


def downgrade() -> None:
    op.drop_table("channelswitch")
    op.drop_table("mutedmember")
    op.drop_table("forgetorder")

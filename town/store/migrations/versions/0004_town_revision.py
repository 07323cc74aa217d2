"""town revision: raised by every tick and input, so an engine knows its kept rows are current

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21 20:55:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: Sequence[str] | None = None
depends_on: Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("town", schema=None) as batch_op:
        batch_op.add_column(sa.Column("revision", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("town", schema=None) as batch_op:
        batch_op.drop_column("revision")

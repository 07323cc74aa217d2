"""memories marked private: a seed phrase a persona file marks private (a feeling, a secret)
is remembered like any other, but never volunteered to a stranger nor shown on a public page

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27 12:45:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: Sequence[str] | None = None
depends_on: Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("memory", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("private", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("memory", schema=None) as batch_op:
        batch_op.drop_column("private")

"""the scheduler's jobs live in memory, built from the towns' rows on start: the table that
APScheduler's database job store made for itself is no longer used

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27 10:50:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: Sequence[str] | None = None
depends_on: Sequence[str] | None = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("apscheduler_jobs"):
        op.drop_table("apscheduler_jobs")


def downgrade() -> None:
    """Nothing to restore: APScheduler made the table itself, and would again."""

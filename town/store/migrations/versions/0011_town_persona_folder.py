"""a town's persona folder as a path of up to 1000 characters (a town of one's own lives in any
folder, ``bottown town update`` records the one it applied), and the persona's revision, raised
by every live update so that a running town in another process takes the town it applied
(stored beside, as JSON: a folder edited since is applied by an update, never by a restart)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28 11:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: Sequence[str] | None = None
depends_on: Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN, not a batch copy of the table: on SQLite a batch alter copies and drops
    # the town table, which the rows referring to it (with foreign keys on) forbid.
    bind = op.get_bind()
    have = {c["name"] for c in sa.inspect(bind).get_columns("town")}
    if "persona_revision" not in have:  # (a database stamped older than it is has it)
        op.add_column(
            "town", sa.Column("persona_revision", sa.Integer(), nullable=False, server_default="0")
        )
    if "applied_persona" not in have:
        op.add_column("town", sa.Column("applied_persona", sa.JSON(), nullable=True))
    if bind.dialect.name != "sqlite":  # (SQLite keeps text of any length: nothing to widen)
        op.alter_column(
            "town", "scenario", existing_type=sa.String(length=80), type_=sa.String(length=1000)
        )


def downgrade() -> None:
    with op.batch_alter_table("town", schema=None) as batch_op:
        batch_op.alter_column(
            "scenario", existing_type=sa.String(length=1000), type_=sa.String(length=80)
        )
    with op.batch_alter_table("town", schema=None) as batch_op:
        batch_op.drop_column("applied_persona")
        batch_op.drop_column("persona_revision")

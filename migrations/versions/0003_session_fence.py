"""Sessions keep the fencing token of the newest replica lease that claimed them; turns are
indexed by status (every replica looks for unfinished ones of lost replicas).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26

With several replicas, the replica running a session's CLI holds a lease in Redis whose token
grows with every new lease; the store refuses events written under a token older than the
session's ``fence``, so a replica that lost its lease can never append again.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(
            sa.Column("fence", sa.BigInteger(), server_default=sa.text("0"), nullable=False)
        )
    op.create_index("ix_turns_status", "turns", ["status"])

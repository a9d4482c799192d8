"""A session may be a fork of another: which session and turn it was forked at, and what
its first thread starts from until it has one.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28

All three are null for a session that is not a fork (every session stored before).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("forked_from", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("forked_at", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("fork_start", sa.JSON(), nullable=True))

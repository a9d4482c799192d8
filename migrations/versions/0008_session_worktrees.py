"""A session may run in a Git worktree of its own: its repository, branch, base commit and the
repository's Git directory are kept with it.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28

All four are null for a session on a plain workspace (every session stored before).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("repository", sa.Text(), nullable=True))
        batch.add_column(sa.Column("branch", sa.Text(), nullable=True))
        batch.add_column(sa.Column("base", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("git_dir", sa.Text(), nullable=True))

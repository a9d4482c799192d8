"""Turns keep when a wait for a usage limit's reset ends, so the wait survives a restart.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26

A turn whose agent hit a usage limit waits (status ``retrying``) until the limit resets and
then continues in the same thread; ``resume_at`` is when. A gateway that starts and finds a
turn with ``resume_at`` set resumes the wait instead of failing the turn.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("turns") as batch:
        batch.add_column(sa.Column("resume_at", sa.DateTime(), nullable=True))

"""Approvals keep the input a client edited, and who edited it.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25

An ``allow`` with ``updated_input`` runs the edited input; the approval now records it beside
the input the agent asked about.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(sa.Column("updated_input", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("updated_by", sa.String(length=64), nullable=True))

"""Requests sent with an ``Idempotency-Key`` are kept with their answer; a session may have a
budget of its own.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29

``idempotency_keys`` holds one row per (key name, idempotency key): the primary key decides
which of several copies of a request runs, on every replica; retention deletes the rows past
``expires_at``. ``sessions.budget`` is null for a session without a budget of its own (every
session stored before).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=False),
        sa.Column("request", sa.String(length=300), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("holder", sa.String(length=64), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("headers", sa.JSON(), nullable=True),
        sa.Column("body", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("owner", "idempotency_key", name="pk_idempotency_keys"),
    )
    op.create_index(
        "ix_idempotency_keys_expires_at", "idempotency_keys", ["expires_at"], unique=False
    )
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("budget", sa.JSON(), nullable=True))

"""Ownership lives in the database: each session names the replica that holds it, and each
replica's heartbeat says whether it is alive.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27

A session's ``holder`` is the replica that runs its CLI (None: nobody does); ``replicas``
keeps each replica's last heartbeat, in seconds since the epoch by the database's clock. A
replica adopts another's sessions only once that one has been silent for ``lease_ttl_s``, so
Redis losing its data can no longer make a live owner look dead.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("holder", sa.String(length=64), nullable=True))
        batch.create_index("ix_sessions_holder", ["holder"])
    op.create_table(
        "replicas",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("seen_at", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_replicas")),
    )

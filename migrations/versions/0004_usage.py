"""Turns are indexed by when they ended: usage reports sum the turns of a time range.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26

``GET /v1/usage`` sums the usage of the turns that ended in ``[from, to)``
(``app/store/usage.py``); without the index every report reads the whole turns table.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_turns_finished_at", "turns", ["finished_at"])

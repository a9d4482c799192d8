"""Approvals also hold the agent's questions: a kind, and the answers a client gave.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26

A question the agent asks (Claude Code's AskUserQuestion, OpenCode's question tool) waits,
expires and is recovered exactly like an approval, so it lives in the same table: ``kind``
says which (``tool`` for every existing row), ``answers`` keeps a question's answers.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("approvals") as batch:
        batch.add_column(
            sa.Column(
                "kind", sa.String(length=16), server_default=sa.text("'tool'"), nullable=False
            )
        )
        batch.add_column(sa.Column("answers", sa.JSON(), nullable=True))

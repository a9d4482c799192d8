"""A session's title, kept on its row so lists show it and searches find it: its
``metadata.title``, else the start of its first prompt.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28

Sessions stored before are titled here the same way (``app.records.session_title``), in
batches, so a large database is not read into memory at once.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.records import session_title

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 500

sessions = sa.table(
    "sessions",
    sa.column("id", sa.String),
    sa.column("metadata", sa.JSON),
    sa.column("title", sa.Text),
)
turns = sa.table(
    "turns",
    sa.column("session_id", sa.String),
    sa.column("seq_no", sa.Integer),
    sa.column("prompt", sa.Text),
)


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("title", sa.Text(), nullable=True))
    connection = op.get_bind()
    first_prompt = (
        sa.select(turns.c.prompt)
        .where(turns.c.session_id == sessions.c.id, turns.c.seq_no == 1)
        .scalar_subquery()
    )
    after = ""
    while True:
        rows = connection.execute(
            sa.select(sessions.c.id, sessions.c.metadata, first_prompt)
            .where(sessions.c.id > after)
            .order_by(sessions.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            break
        for session_id, metadata, prompt in rows:
            title = session_title((metadata or {}).get("title")) or session_title(prompt)
            if title is not None:
                connection.execute(
                    sessions.update().where(sessions.c.id == session_id).values(title=title)
                )
        after = rows[-1][0]


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("title")

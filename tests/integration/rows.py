"""Rows the store tests insert directly."""

from __future__ import annotations

from datetime import datetime

from app.store.tables import SessionRow, SessionStatus


def session_row(
    session_id: str,
    *,
    at: datetime,
    status: SessionStatus = "idle",
    provider: str = "claude_code",
    last_seq: int = 0,
) -> SessionRow:
    """A session created and last updated ``at``, in ``/work/project``."""
    return SessionRow(
        id=session_id,
        provider=provider,
        workspace="/work/project",
        approval_mode="ask",
        status=status,
        last_seq=last_seq,
        created_at=at,
        updated_at=at,
    )

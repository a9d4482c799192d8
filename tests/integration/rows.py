"""Sessions the store tests start from: as a row (inserted directly) or a record (through
``Store.create_session``)."""

from __future__ import annotations

from datetime import datetime

from app.records import SessionRecord, SessionStatus
from app.store import mapping
from app.store.tables import SessionRow


def session_record(
    session_id: str,
    *,
    at: datetime,
    status: SessionStatus = "idle",
    provider: str = "claude_code",
    last_seq: int = 0,
) -> SessionRecord:
    """A session created and last updated ``at``, in ``/work/project``, for the ``Storage``
    interface."""
    return SessionRecord(
        id=session_id,
        owner=None,
        provider=provider,
        model=None,
        workspace="/work/project",
        approval_mode="ask",
        status=status,
        last_seq=last_seq,
        created_at=at,
        updated_at=at,
    )


def session_row(
    session_id: str,
    *,
    at: datetime,
    status: SessionStatus = "idle",
    provider: str = "claude_code",
    last_seq: int = 0,
) -> SessionRow:
    """The row of ``session_record``, to insert directly."""
    record = session_record(session_id, at=at, status=status, provider=provider, last_seq=last_seq)
    return mapping.session_row(record)

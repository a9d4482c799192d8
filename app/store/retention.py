"""Retention: forget threads unused for the retention period, and what only they explained;
and the answers kept for idempotency keys once they expire.

Run by the periodic retention task and by the admin command. Each run is one transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from app.records import ENDED_SESSION_STATUSES
from app.store.tables import BindingRow, EventRow, IdempotencyRow, SessionRow


@dataclass(frozen=True, kw_only=True)
class CleanupReport:
    bindings_deleted: int
    events_deleted: int
    sessions_closed: int
    """Sessions that were not ended and were closed because their thread was forgotten."""
    events_pruned: int = 0
    """Events older than the newest ``max_events_per_session`` of their session."""
    forgotten: tuple[str, ...] = field(default=(), compare=False)
    """The sessions whose every thread was forgotten (their CLI homes can go too)."""
    idempotency_keys_deleted: int = 0
    """Requests sent with an ``Idempotency-Key`` whose kept answer expired."""


async def cleanup(
    engine: AsyncEngine,
    *,
    retention_days: int,
    now: datetime,
    max_events_per_session: int | None = None,
) -> CleanupReport:
    """Delete bindings last used before ``now - retention_days``.

    With ``max_events_per_session``, every session keeps only its newest that many events; a
    client whose cursor is older gets ``410 cursor_expired`` or a ``resync_required`` frame.

    Requests kept for their ``Idempotency-Key`` past their ``expires_at`` are deleted.

    A session left with no binding at all loses its event log; if it had not ended, it is also
    closed at ``now``, since it can no longer resume its thread. A session that still has a
    binding used within the period (say, after a provider switch) keeps its events and status.
    """
    if retention_days < 1:
        raise ValueError(f"retention_days must be at least 1, not {retention_days}")
    cutoff = now - timedelta(days=retention_days)
    stale = BindingRow.updated_at < cutoff
    still_bound = select(BindingRow.session_id).where(BindingRow.updated_at >= cutoff)
    forgotten = select(BindingRow.session_id).where(
        stale, BindingRow.session_id.not_in(still_bound)
    )
    async with engine.begin() as connection:
        ids = tuple((await connection.execute(forgotten.distinct())).scalars())
        events = await connection.execute(
            delete(EventRow).where(EventRow.session_id.in_(forgotten))
        )
        closed = await connection.execute(
            update(SessionRow)
            .where(SessionRow.id.in_(forgotten), SessionRow.status.not_in(ENDED_SESSION_STATUSES))
            .values(status="closed", closed_at=now, updated_at=now)
        )
        bindings = await connection.execute(delete(BindingRow).where(stale))
        pruned = 0
        if max_events_per_session is not None:
            newest = (
                select(SessionRow.last_seq)
                .where(SessionRow.id == EventRow.session_id)
                .scalar_subquery()
            )
            result = await connection.execute(
                delete(EventRow).where(EventRow.seq <= newest - max_events_per_session)
            )
            pruned = result.rowcount
        expired = await connection.execute(
            delete(IdempotencyRow).where(IdempotencyRow.expires_at < now)
        )
    return CleanupReport(
        bindings_deleted=bindings.rowcount,
        events_deleted=events.rowcount,
        sessions_closed=closed.rowcount,
        events_pruned=pruned,
        forgotten=ids,
        idempotency_keys_deleted=expired.rowcount,
    )

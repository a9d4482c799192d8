"""What the gateway needs from storage, stated once: the ``Storage`` protocol.

The runtime (sessions, turns, approvals, the event log, recovery, retention) talks to storage
through this and nothing else; it takes and returns the plain records of ``app.records``.
``app.store.repository.Store`` implements it on SQLite and on PostgreSQL. Another backend
implements the same methods with the same contracts:

- every write is one transaction: all of it is kept, or none of it and ``StorageUnavailable``
  (503) is raised when the database cannot take writes now (full, I/O error, locked);
- a call a cancelled caller made runs to its end first (no transaction is left half-way);
- ``insert_events`` keeps a session's ``last_seq`` at its newest event and prunes what
  ``prune_through`` says in the same transaction, and refuses the whole batch
  (``SessionFenced``) when ``fences`` names a token older than the newest that
  ``claim_session`` handed out for a session; with several replicas, who runs each session
  is decided here too (``app.store.ownership``: heartbeats, claims, and a fence on every
  write a session's owner makes); ``events_after`` reads events oldest first
  in their wire form, ``events_before`` those of some types newest first (the log from its
  end); ``event_bounds`` survives pruning and retention; the webhook messages ``outbox``
  names are written in the events' own transaction (none without its event).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from app.records import (
    ApprovalRecord,
    BindingRecord,
    EventRecord,
    IdempotencyRecord,
    RequestKind,
    SessionRecord,
    StoredEvent,
    TurnRecord,
    UsageGroup,
    UsageTotals,
)
from app.store.outbox import OutboxMessage
from app.store.ownership import Claimed, HeldBy
from app.store.retention import CleanupReport


class Storage(Protocol):
    """The gateway's storage; ``**values`` of an update are fields of its record."""

    async def ping(self) -> None: ...

    async def create_session(self, session: SessionRecord) -> None: ...

    async def discard_session(self, session_id: str) -> None:
        """Delete a session that was never handed out, with whatever of it was stored."""

    async def get_session(self, session_id: str) -> SessionRecord | None: ...

    async def list_sessions(
        self,
        *,
        owner: str | None,
        status: str | None,
        limit: int,
        before: datetime | None,
        max_bytes: int | None = None,
        provider: str | None = None,
        search: str | None = None,
    ) -> list[SessionRecord]:
        """Newest first; ``max_bytes`` bounds the page's stored size (app/store/pages.py);
        ``search``: sessions matching every word of it (app/store/search.py)."""

    async def session_status_counts(self) -> dict[str, int]: ...

    async def count_open_sessions(self, owner: str) -> int: ...

    async def update_session(self, session_id: str, **values: Any) -> SessionRecord: ...

    async def touch_binding(
        self, *, session_id: str, provider: str, thread_id: str, now: datetime
    ) -> None: ...

    async def get_binding(self, session_id: str, provider: str) -> BindingRecord | None: ...

    async def add_turn(self, turn: TurnRecord, *, now: datetime) -> TurnRecord: ...

    async def turn_running(
        self, turn_id: str, session_id: str, *, now: datetime, **values: Any
    ) -> None: ...

    async def get_turn(self, session_id: str, turn_id: str) -> TurnRecord | None: ...

    async def list_turns(
        self,
        session_id: str,
        *,
        limit: int,
        before: int | None = None,
        max_bytes: int | None = None,
    ) -> list[TurnRecord]:
        """Newest first, numbered below ``before``; ``max_bytes`` as for sessions."""

    async def update_turn(self, turn_id: str, **values: Any) -> TurnRecord: ...

    async def session_usage(self, session_ids: Sequence[str]) -> dict[str, UsageTotals]: ...

    async def usage_report(self, *, since: datetime, until: datetime) -> list[UsageGroup]: ...

    async def key_usage(self, owner: str, *, since: datetime, until: datetime) -> UsageTotals:
        """The usage of the turns of ``owner``'s sessions that ended in ``[since, until)``."""

    async def claim_request(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        """Store ``record`` unless its (owner, key) is taken: None, else the row holding it."""

    async def retake_request(self, record: IdempotencyRecord, *, was: IdempotencyRecord) -> bool:
        """Replace the row ``was`` with ``record`` if it is still as read."""

    async def finish_request(
        self, claimed: IdempotencyRecord, *, status: int, headers: dict[str, Any], body: str
    ) -> bool:
        """Keep the answer of the request ``claimed``, while that claim holds its key."""

    async def release_request(self, claimed: IdempotencyRecord) -> None: ...

    async def release_requests_of(self, holder: str | None) -> int: ...

    async def create_approval(self, approval: ApprovalRecord) -> None: ...

    async def get_approval(self, session_id: str, approval_id: str) -> ApprovalRecord | None: ...

    async def list_approvals(
        self,
        session_id: str,
        *,
        status: str | None,
        limit: int,
        kind: RequestKind = "tool",
        before: datetime | None = None,
        max_bytes: int | None = None,
    ) -> list[ApprovalRecord]:
        """Newest first, created before ``before``; ``max_bytes`` as for sessions."""

    async def update_approval(self, approval_id: str, **values: Any) -> ApprovalRecord: ...

    async def insert_events(
        self,
        records: Sequence[EventRecord],
        *,
        prune_through: Mapping[str, int] | None = None,
        fences: Mapping[str, int] | None = None,
        outbox: Sequence[OutboxMessage] = (),
    ) -> None: ...

    async def events_within(
        self, session_id: str, *, after: int, limit: int, max_bytes: int
    ) -> int:
        """How many of the next ``limit`` events after ``after`` fit in ``max_bytes``
        (at least one when there is one)."""

    async def heartbeat(self, replica_id: str) -> None: ...

    async def live_replicas(self, *, stale_after_s: float) -> list[str]: ...

    async def claim_session(
        self, session_id: str, *, holder: str, stale_after_s: float, take_stale: bool = True
    ) -> Claimed | HeldBy | None: ...

    async def release_session(self, session_id: str, *, holder: str) -> None: ...

    async def holders(self, session_ids: Sequence[str]) -> dict[str, tuple[str | None, int]]: ...

    async def live_holder(self, session_id: str, *, stale_after_s: float) -> str | None: ...

    async def orphaned_sessions(self, *, me: str, stale_after_s: float) -> list[str]: ...

    async def events_after(
        self, session_id: str, *, after: int, limit: int
    ) -> list[StoredEvent]: ...

    async def events_before(
        self, session_id: str, *, before: int, types: Sequence[str], limit: int
    ) -> list[StoredEvent]: ...

    async def last_event_seq(self, session_id: str) -> int: ...

    async def event_bounds(self, session_id: str) -> tuple[int, int]: ...

    async def unfinished_turns(self) -> list[TurnRecord]: ...

    async def reset_busy_sessions(self, now: datetime) -> None: ...

    async def pending_approvals(self) -> list[ApprovalRecord]: ...

    async def retain(
        self, *, retention_days: int, now: datetime, max_events_per_session: int | None
    ) -> CleanupReport: ...

    def close(self) -> None: ...

"""The storage: every query the runtime makes, behind one ``Store`` built from an engine.

``Store`` is the implementation of ``app.store.interface.Storage`` on both engines, a SQLite
file and PostgreSQL: it takes and returns the plain records of ``app.records``; ORM rows stay
in here (``app.store.mapping`` converts). The event log's table, on the path of every event,
has its own access per engine: ``EventFile`` (SQLite, threads and connections of its own) and
``EventTable`` (PostgreSQL, whole columns per statement).
Records are snapshots: change what is stored through the ``update_*`` methods, which write
and return the fresh record.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.events import encode_event
from app.records import (
    ENDED_SESSION_STATUSES,
    LIVE_TURN_STATUSES,
    ApprovalRecord,
    BindingRecord,
    EventRecord,
    RequestKind,
    SessionRecord,
    StoredEvent,
    TurnRecord,
    UsageGroup,
    UsageTotals,
)
from app.store.bindings import touch_binding
from app.store.calls import run_to_completion, uninterrupted
from app.store.db import session_factory, sqlite_file, storage_errors
from app.store.eventfile import EventFile, PageRow
from app.store.eventtable import EventTable
from app.store.mapping import (
    approval_record,
    approval_row,
    binding_record,
    session_record,
    session_row,
    turn_record,
    turn_row,
)
from app.store.pages import APPROVAL_SIZE, SESSION_SIZE, TURN_SIZE, bounded, fitting, stored_size
from app.store.retention import CleanupReport, cleanup
from app.store.tables import (
    ApprovalRow,
    BindingRow,
    EventRow,
    SessionRow,
    TurnRow,
)
from app.store.usage import report_query, session_totals_query, totals_of, usage_groups


class Store:
    """The gateway's tables, one short transaction per call.

    A write the database cannot take (disk full, I/O error, still locked after the busy
    timeout) raises ``StorageUnavailable`` (503); nothing of that call is kept.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sessions = session_factory(engine)
        self._events: EventFile | EventTable | None = None

    def close(self) -> None:
        """Stop the event file's threads and close their connections (before the engine's
        ``dispose``); a later event read or write opens them again."""
        events, self._events = self._events, None
        if events is not None:
            events.close()

    def _event_file(self) -> EventFile | EventTable:
        if self._events is None:
            if self.engine.url.get_backend_name() == "sqlite":
                self._events = EventFile(sqlite_file(self.engine.url))
            else:
                self._events = EventTable(self.engine)
        return self._events

    @contextlib.asynccontextmanager
    async def _read(self) -> AsyncIterator[AsyncSession]:
        with storage_errors():
            async with self._sessions() as db:
                yield db

    @contextlib.asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncSession]:
        """A transaction that commits when the block ends and rolls back when it raises.

        The commit or rollback runs to its end even when the calling task is cancelled
        meanwhile (a turn stopped by a session's deletion): abandoned half-way, it would hand
        the pool a connection still holding SQLite's write lock, and every other writer would
        wait out the busy timeout.
        """
        with storage_errors():
            async with self._sessions() as db:  # closes to completion as well
                try:
                    yield db
                except BaseException:
                    await run_to_completion(db.rollback())
                    raise
                await run_to_completion(db.commit())

    # --- sessions -------------------------------------------------------------------------

    @uninterrupted
    async def ping(self) -> None:
        """Return once the database answers a query; raise what it raised otherwise."""
        async with self._read() as db:
            await db.execute(select(1))

    @uninterrupted
    async def create_session(self, session: SessionRecord) -> None:
        async with self._write() as db:
            db.add(session_row(session))

    @uninterrupted
    async def discard_session(self, session_id: str) -> None:
        async with self._write() as db:
            await db.execute(delete(EventRow).where(EventRow.session_id == session_id))
            await db.execute(delete(SessionRow).where(SessionRow.id == session_id))

    @uninterrupted
    async def get_session(self, session_id: str) -> SessionRecord | None:
        async with self._read() as db:
            row = await db.get(SessionRow, session_id)
        return session_record(row) if row is not None else None

    @uninterrupted
    async def list_sessions(
        self,
        *,
        owner: str | None,
        status: str | None,
        limit: int,
        before: datetime | None,
        max_bytes: int | None = None,
    ) -> list[SessionRecord]:
        query = select(SessionRow).order_by(SessionRow.created_at.desc()).limit(limit)
        if owner is not None:
            query = query.where(SessionRow.owner == owner)
        if status is not None:
            query = query.where(SessionRow.status == status)
        if before is not None:
            query = query.where(SessionRow.created_at < before)
        async with self._read() as db:
            rows = await bounded(db, query, SessionRow.id, SESSION_SIZE, max_bytes)
        return [session_record(row) for row in rows]

    @uninterrupted
    async def session_status_counts(self) -> dict[str, int]:
        """How many sessions the database holds in each status."""
        query = select(SessionRow.status, func.count()).group_by(SessionRow.status)
        async with self._read() as db:
            return {status: int(count) for status, count in (await db.execute(query)).all()}

    @uninterrupted
    async def count_open_sessions(self, owner: str) -> int:
        """Sessions of ``owner`` that are not closed or failed."""
        query = (
            select(func.count())
            .select_from(SessionRow)
            .where(SessionRow.owner == owner, SessionRow.status.not_in(ENDED_SESSION_STATUSES))
        )
        async with self._read() as db:
            return int((await db.scalar(query)) or 0)

    @uninterrupted
    async def update_session(self, session_id: str, **values: Any) -> SessionRecord:
        async with self._write() as db:
            await db.execute(update(SessionRow).where(SessionRow.id == session_id).values(values))
            row = await db.get(SessionRow, session_id, populate_existing=True)
        assert row is not None, session_id
        return session_record(row)

    # --- bindings -------------------------------------------------------------------------

    @uninterrupted
    async def touch_binding(
        self, *, session_id: str, provider: str, thread_id: str, now: datetime
    ) -> None:
        async with self._write() as db:
            await touch_binding(
                db, session_id=session_id, provider=provider, thread_id=thread_id, now=now
            )

    @uninterrupted
    async def get_binding(self, session_id: str, provider: str) -> BindingRecord | None:
        async with self._read() as db:
            row = await db.get(BindingRow, (session_id, provider))
        return binding_record(row) if row is not None else None

    # --- turns ----------------------------------------------------------------------------

    @uninterrupted
    async def add_turn(self, turn: TurnRecord, *, now: datetime) -> TurnRecord:
        """Insert ``turn`` as the session's next one and mark the session ``running``, in one
        transaction (on the path of every turn's start); the turn returned has its
        ``number``, one past the session's newest turn."""
        async with self._write() as db:
            current = await db.scalar(
                select(func.max(TurnRow.seq_no)).where(TurnRow.session_id == turn.session_id)
            )
            number = (current or 0) + 1
            db.add(turn_row(turn, number=number))
            await db.execute(
                update(SessionRow)
                .where(SessionRow.id == turn.session_id)
                .values(status="running", updated_at=now)
            )
        return dataclasses.replace(turn, number=number)

    @uninterrupted
    async def turn_running(
        self, turn_id: str, session_id: str, *, now: datetime, **values: Any
    ) -> None:
        """Mark the turn ``running`` (with ``values``) and its session ``running``, in one
        transaction: on the path of every attempt's start."""
        async with self._write() as db:
            await db.execute(
                update(TurnRow).where(TurnRow.id == turn_id).values(status="running", **values)
            )
            await db.execute(
                update(SessionRow)
                .where(SessionRow.id == session_id)
                .values(status="running", updated_at=now)
            )

    @uninterrupted
    async def get_turn(self, session_id: str, turn_id: str) -> TurnRecord | None:
        async with self._read() as db:
            row = await db.get(TurnRow, turn_id)
        return turn_record(row) if row is not None and row.session_id == session_id else None

    @uninterrupted
    async def list_turns(
        self,
        session_id: str,
        *,
        limit: int,
        before: int | None = None,
        max_bytes: int | None = None,
    ) -> list[TurnRecord]:
        query = (
            select(TurnRow)
            .where(TurnRow.session_id == session_id)
            .order_by(TurnRow.seq_no.desc())
            .limit(limit)
        )
        if before is not None:
            query = query.where(TurnRow.seq_no < before)
        async with self._read() as db:
            rows = await bounded(db, query, TurnRow.id, TURN_SIZE, max_bytes)
        return [turn_record(row) for row in rows]

    @uninterrupted
    async def update_turn(self, turn_id: str, **values: Any) -> TurnRecord:
        async with self._write() as db:
            await db.execute(update(TurnRow).where(TurnRow.id == turn_id).values(values))
            row = await db.get(TurnRow, turn_id, populate_existing=True)
        assert row is not None, turn_id
        return turn_record(row)

    # --- approvals ------------------------------------------------------------------------

    @uninterrupted
    async def session_usage(self, session_ids: Sequence[str]) -> dict[str, UsageTotals]:
        """The usage of each session's ended turns; a session without one is left out."""
        if not session_ids:
            return {}
        async with self._read() as db:
            rows = (await db.execute(session_totals_query(session_ids))).all()
        return {row[0]: totals_of(row) for row in rows}

    @uninterrupted
    async def usage_report(self, *, since: datetime, until: datetime) -> list[UsageGroup]:
        """Usage of the turns that ended in ``[since, until)`` by key, provider and model."""
        async with self._read() as db:
            rows = (await db.execute(report_query(since=since, until=until))).all()
        return usage_groups(rows)

    @uninterrupted
    async def create_approval(self, approval: ApprovalRecord) -> None:
        async with self._write() as db:
            db.add(approval_row(approval))

    @uninterrupted
    async def get_approval(self, session_id: str, approval_id: str) -> ApprovalRecord | None:
        async with self._read() as db:
            row = await db.get(ApprovalRow, approval_id)
        if row is None or row.session_id != session_id:
            return None
        return approval_record(row)

    @uninterrupted
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
        query = (
            select(ApprovalRow)
            .where(ApprovalRow.session_id == session_id, ApprovalRow.kind == kind)
            .order_by(ApprovalRow.created_at.desc())
            .limit(limit)
        )
        if status is not None:
            query = query.where(ApprovalRow.status == status)
        if before is not None:
            query = query.where(ApprovalRow.created_at < before)
        async with self._read() as db:
            rows = await bounded(db, query, ApprovalRow.id, APPROVAL_SIZE, max_bytes)
        return [approval_record(row) for row in rows]

    @uninterrupted
    async def update_approval(self, approval_id: str, **values: Any) -> ApprovalRecord:
        async with self._write() as db:
            await db.execute(
                update(ApprovalRow).where(ApprovalRow.id == approval_id).values(values)
            )
            row = await db.get(ApprovalRow, approval_id, populate_existing=True)
        assert row is not None, approval_id
        return approval_record(row)

    # --- events ---------------------------------------------------------------------------

    async def insert_events(
        self,
        records: Sequence[EventRecord],
        *,
        prune_through: Mapping[str, int] | None = None,
        fences: Mapping[str, int] | None = None,
    ) -> None:
        """Append events (of one or more sessions) in one transaction, advancing each
        session's ``last_seq`` to its newest one; ``prune_through`` maps a session to the seq
        up to which its older events are deleted in the same transaction. ``fences`` maps a
        session to the lease token its events are written under: a session claimed since by a
        newer lease fails the whole call with ``SessionFenced`` and nothing is written.

        Written by the event log's own access (``EventFile`` on SQLite, ``EventTable`` on
        PostgreSQL); runs to its end even when the caller is cancelled."""
        if not records:
            return
        rows = [
            (r.session_id, r.seq, r.turn_id, r.attempt, r.provider, r.at_text, r.type, r.data_json)
            for r in records
        ]
        events = self._event_file()
        if isinstance(events, EventFile):
            await events.write(rows, prune_through, fences)  # classifies and shields itself
            return
        with storage_errors():
            await run_to_completion(events.write(rows, prune_through, fences))

    async def events_after(self, session_id: str, *, after: int, limit: int) -> list[StoredEvent]:
        """Up to ``limit`` events with ``seq > after``, oldest first, in their wire form.

        Read as plain rows on the event file's own reader (``EventFile.page``), the payload
        as the JSON text it was stored as, built into the envelope without being decoded:
        replays read thousands of events."""
        with storage_errors():
            rows = await self._event_file().page(session_id, after=after, limit=limit)
        return _stored_events(session_id, rows)

    async def events_before(
        self, session_id: str, *, before: int, types: Sequence[str], limit: int
    ) -> list[StoredEvent]:
        """Up to ``limit`` events of ``types`` with ``seq < before``, newest first, in their
        wire form (read like ``events_after``): the log read from its end."""
        with storage_errors():
            rows = await self._event_file().page_backwards(
                session_id, before=before, types=types, limit=limit
            )
        return _stored_events(session_id, rows)

    @uninterrupted
    async def events_within(
        self, session_id: str, *, after: int, limit: int, max_bytes: int
    ) -> int:
        """How many of the next ``limit`` events after ``after`` fit in ``max_bytes``."""
        query = (
            select(EventRow.seq, stored_size(EventRow.data))
            .where(EventRow.session_id == session_id, EventRow.seq > after)
            .order_by(EventRow.seq)
            .limit(limit)
        )
        async with self._read() as db:
            return len(fitting((await db.execute(query)).tuples().all(), max_bytes))

    @uninterrupted
    async def claim_session(self, session_id: str) -> int | None:
        """Hand out the session's next fencing token (its ``fence`` plus one) to a replica
        that has just taken its lease: events written under an older token are refused from
        now on. None when there is no such session."""
        async with self._write() as db:
            token = await db.scalar(
                update(SessionRow)
                .where(SessionRow.id == session_id)
                .values(fence=SessionRow.fence + 1)
                .returning(SessionRow.fence)
            )
        return None if token is None else int(token)

    @uninterrupted
    async def last_event_seq(self, session_id: str) -> int:
        return (await self.event_bounds(session_id))[1]

    @uninterrupted
    async def event_bounds(self, session_id: str) -> tuple[int, int]:
        """``(first, last)``: the oldest kept seq and the newest seq ever numbered.

        The newest is the larger of the stored events and the session's ``last_seq`` (pruning
        or retention may have removed every event); with no event kept, first is last + 1.
        """
        async with self._read() as db:
            low, high = (
                await db.execute(
                    select(func.min(EventRow.seq), func.max(EventRow.seq)).where(
                        EventRow.session_id == session_id
                    )
                )
            ).one()
            recorded = await db.scalar(
                select(SessionRow.last_seq).where(SessionRow.id == session_id)
            )
        last = max(high or 0, recorded or 0)
        return (low if low is not None else last + 1), last

    # --- retention ------------------------------------------------------------------------

    async def retain(
        self, *, retention_days: int, now: datetime, max_events_per_session: int | None
    ) -> CleanupReport:
        """Apply retention now (``app.store.retention.cleanup``)."""
        with storage_errors():
            return await cleanup(
                self.engine,
                retention_days=retention_days,
                now=now,
                max_events_per_session=max_events_per_session,
            )

    # --- start-up recovery ----------------------------------------------------------------

    @uninterrupted
    async def unfinished_turns(self) -> list[TurnRecord]:
        query = select(TurnRow).where(TurnRow.status.in_(LIVE_TURN_STATUSES))
        async with self._read() as db:
            return [turn_record(row) for row in await db.scalars(query)]

    @uninterrupted
    async def reset_busy_sessions(self, now: datetime) -> None:
        """Sessions left running by a previous process are idle now: nothing runs them."""
        async with self._write() as db:
            await db.execute(
                update(SessionRow)
                .where(SessionRow.status.in_(("running", "awaiting_approval", "retrying")))
                .values(status="idle", updated_at=now)
            )

    @uninterrupted
    async def pending_approvals(self) -> list[ApprovalRecord]:
        query = select(ApprovalRow).where(ApprovalRow.status == "pending")
        async with self._read() as db:
            return [approval_record(row) for row in await db.scalars(query)]


def _stored_events(session_id: str, rows: Sequence[PageRow]) -> list[StoredEvent]:
    """Event rows in their wire form, the payload kept as the JSON text it was stored as."""
    return [
        StoredEvent(
            seq=seq,
            type=kind,  # type: ignore[arg-type]  # written from EventType values only
            turn_id=turn_id,
            json=encode_event(
                seq=seq,
                session_id=session_id,
                turn_id=turn_id,
                attempt=attempt,
                provider=provider,
                at=at,
                type=kind,
                data_json=data,
            ),
        )
        for seq, turn_id, attempt, provider, at, kind, data in rows
    ]

"""The storage: every query the runtime makes, behind one ``Store`` built from an engine.

``Store`` is the implementation of ``app.store.interface.Storage`` on both engines, a SQLite
file and PostgreSQL: it takes and returns the plain records of ``app.records``; ORM rows stay
in here (``app.store.mapping`` converts). The event log's table, on the path of every event,
has its own access per engine: ``EventFile`` (SQLite, threads and connections of its own) and
``EventTable`` (PostgreSQL, whole columns per statement); its queries are in
``app.store.eventqueries``. Records are snapshots: change what is stored through the
``update_*`` methods, which write and return the fresh record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update

from app.records import (
    BUSY_SESSION_STATUSES,
    ENDED_SESSION_STATUSES,
    LIVE_TURN_STATUSES,
    ApprovalRecord,
    BindingRecord,
    RequestKind,
    SessionRecord,
    TurnRecord,
    UsageGroup,
    UsageTotals,
    session_title,
)
from app.store.bindings import touch_binding
from app.store.calls import uninterrupted
from app.store.db import storage_errors
from app.store.eventqueries import EventQueries
from app.store.idempotency import IdempotencyKeys
from app.store.mapping import (
    approval_record,
    approval_row,
    binding_record,
    session_record,
    session_row,
    turn_record,
    turn_row,
)
from app.store.ownership import Ownership
from app.store.pages import APPROVAL_SIZE, SESSION_SIZE, TURN_SIZE, bounded
from app.store.retention import CleanupReport, cleanup
from app.store.search import matching
from app.store.tables import ApprovalRow, BindingRow, EventRow, SessionRow, TurnRow
from app.store.usage import (
    key_totals_query,
    report_query,
    session_totals_query,
    totals_of,
    usage_groups,
)


class Store(Ownership, EventQueries, IdempotencyKeys):
    """The gateway's tables, one short transaction per call.

    A write the database cannot take (disk full, I/O error, still locked after the busy
    timeout) raises ``StorageUnavailable`` (503); nothing of that call is kept. The
    transactions are ``app.store.transactions``'s, the event log's queries
    ``app.store.eventqueries``'s, who runs each session ``app.store.ownership``'s. Built with
    ``holder`` (one replica of several), every write a session's owner makes is refused with
    ``SessionFenced`` once another replica has claimed the session.
    """

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
        provider: str | None = None,
        search: str | None = None,
    ) -> list[SessionRecord]:
        query = select(SessionRow).order_by(SessionRow.created_at.desc()).limit(limit)
        if owner is not None:
            query = query.where(SessionRow.owner == owner)
        if status is not None:
            query = query.where(SessionRow.status == status)
        if provider is not None:
            query = query.where(SessionRow.provider == provider)
        if search:
            query = query.where(matching(search))
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
            await self._fence(db, session_id=session_id, exclusive=True)
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
            await self._fence(db, session_id=session_id)
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
            await self._fence(db, session_id=turn.session_id, exclusive=True)
            current = await db.scalar(
                select(func.max(TurnRow.seq_no)).where(TurnRow.session_id == turn.session_id)
            )
            number = (current or 0) + 1
            db.add(turn_row(turn, number=number))
            values: dict[str, Any] = {"status": "running", "updated_at": now}
            if number == 1:  # an untitled session is titled by its first prompt
                values["title"] = func.coalesce(SessionRow.title, session_title(turn.prompt))
            await db.execute(
                update(SessionRow).where(SessionRow.id == turn.session_id).values(**values)
            )
        return dataclasses.replace(turn, number=number)

    @uninterrupted
    async def turn_running(
        self, turn_id: str, session_id: str, *, now: datetime, **values: Any
    ) -> None:
        """Mark the turn ``running`` (with ``values``) and its session ``running``, in one
        transaction: on the path of every attempt's start."""
        async with self._write() as db:
            await self._fence(db, session_id=session_id, exclusive=True)
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
            await self._fence(db, turn_id=turn_id)
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
    async def key_usage(self, owner: str, *, since: datetime, until: datetime) -> UsageTotals:
        """The usage of the turns of ``owner``'s sessions that ended in ``[since, until)``."""
        async with self._read() as db:
            row = (await db.execute(key_totals_query(owner, since=since, until=until))).one()
        return totals_of(row)

    @uninterrupted
    async def create_approval(self, approval: ApprovalRecord) -> None:
        async with self._write() as db:
            await self._fence(db, session_id=approval.session_id)
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
            await self._fence(db, approval_id=approval_id)
            await db.execute(
                update(ApprovalRow).where(ApprovalRow.id == approval_id).values(values)
            )
            row = await db.get(ApprovalRow, approval_id, populate_existing=True)
        assert row is not None, approval_id
        return approval_record(row)

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
                .where(SessionRow.status.in_(BUSY_SESSION_STATUSES))
                .values(status="idle", updated_at=now)
            )

    @uninterrupted
    async def pending_approvals(self) -> list[ApprovalRecord]:
        query = select(ApprovalRow).where(ApprovalRow.status == "pending")
        async with self._read() as db:
            return [approval_record(row) for row in await db.scalars(query)]

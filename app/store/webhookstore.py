"""The webhook tables' queries: the API's endpoints, routing the outbox into deliveries, and
leasing deliveries to the replica that sends them.

    message (outbox, written with its event) ──route──► one delivery per endpoint that wants it
    delivery pending ──claim (lease)──► sent ──► succeeded | retried later | failed for good

Routing and claiming are each one ``UPDATE … WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED)
RETURNING``: on PostgreSQL two replicas never take the same rows (one skips what the other
locked), on SQLite (one gateway) the statement takes the write lock first. Times that schedule
and lease are the database's clock (seconds since the epoch), as the replicas' heartbeats
(app/store/ownership.py), so the replicas' own clocks never matter.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, Row, delete, func, insert, literal_column, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.store.calls import uninterrupted
from app.store.outbox import OutboxMessage
from app.store.tables import SessionRow
from app.store.transactions import Transactions
from app.store.webhookrecords import (
    ClaimedDelivery,
    DeliveryRecord,
    DeliveryStatus,
    EndpointRecord,
    MessageHead,
)
from app.store.webhooktables import WebhookDeliveryRow, WebhookEndpointRow, WebhookMessageRow

D = WebhookDeliveryRow
M = WebhookMessageRow
ROUTE_BATCH = 200
"""Messages routed in one transaction at most."""


def _endpoint(row: WebhookEndpointRow) -> EndpointRecord:
    return EndpointRecord(
        id=row.id,
        url=row.url,
        secrets=tuple(row.secrets),
        events=tuple(row.events),
        keys=tuple(row.keys) if row.keys is not None else None,
        description=row.description,
        enabled=row.enabled,
        disabled_reason=row.disabled_reason,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def _delivery(row: WebhookDeliveryRow, now_s: float) -> DeliveryRecord:
    return DeliveryRecord(
        id=row.id,
        message_id=row.message_id,
        endpoint_id=row.endpoint_id,
        type=row.type,
        session_id=row.session_id,
        status=row.status,  # type: ignore[arg-type]  # written from DeliveryStatus only
        attempts=row.attempts,
        next_attempt_in_s=max(0.0, row.next_attempt_s - now_s) if row.status == "pending" else None,
        last_status_code=row.last_status_code,
        last_error=row.last_error,
        sent_by=row.sent_by,
        created_at=row.created_at,
        updated_at=row.updated_at,
        finished_at=row.finished_at,
    )


def _deliveries(
    taken: Sequence[Row[str, str, str | None, str | None, str]],
    owners: Mapping[str, str | None],
    choose: Callable[[MessageHead], Sequence[str]],
    *,
    now: datetime,
    now_s: float,
    holder: str,
    free: Mapping[str, int],
    lease_s: float,
) -> tuple[list[dict[str, object]], list[ClaimedDelivery]]:
    """The delivery rows of routed messages, and those of them leased to ``holder`` at once."""
    slots = dict(free)
    made: list[dict[str, object]] = []
    leased: list[ClaimedDelivery] = []
    for message_id, kind, session_id, endpoint_id, payload in taken:
        head = MessageHead(
            id=message_id,
            type=kind,
            session_id=session_id,
            owner=owners.get(session_id) if session_id is not None else None,
            endpoint_id=endpoint_id,
        )
        for endpoint in dict.fromkeys(choose(head)):
            delivery_id = "dlv_" + secrets.token_hex(12)
            holds = slots.get(endpoint, 0) > 0
            if holds:
                slots[endpoint] -= 1
                leased.append(
                    ClaimedDelivery(
                        id=delivery_id,
                        message_id=message_id,
                        endpoint_id=endpoint,
                        type=kind,
                        payload=payload,
                        attempts=0,
                    )
                )
            made.append(
                {
                    "id": delivery_id,
                    "message_id": message_id,
                    "endpoint_id": endpoint,
                    "type": kind,
                    "session_id": session_id,
                    "status": "pending",
                    "attempts": 0,
                    "next_attempt_s": now_s,
                    "lease_holder": holder if holds else None,
                    "lease_until_s": now_s + lease_s if holds else None,
                    "created_at": now,
                    "updated_at": now,
                }
            )
    return made, leased


class WebhookStore(Transactions):
    """The webhook tables, one short transaction per call (``StorageUnavailable`` when the
    database cannot take a write, as every store call)."""

    def _now_s(self) -> ColumnElement[float]:
        """Seconds since the epoch by the database's clock (as ``Ownership._now_s``)."""
        if self.engine.url.get_backend_name() == "sqlite":
            return literal_column("((julianday('now') - 2440587.5) * 86400.0)")
        return literal_column("extract(epoch from clock_timestamp())")

    # --- endpoints added through the API ----------------------------------------------------------

    @uninterrupted
    async def list_endpoints(self) -> list[EndpointRecord]:
        async with self._read() as db:
            rows = await db.scalars(select(WebhookEndpointRow).order_by(WebhookEndpointRow.id))
            return [_endpoint(row) for row in rows]

    @uninterrupted
    async def add_endpoint(self, endpoint: EndpointRecord) -> None:
        async with self._write() as db:
            db.add(
                WebhookEndpointRow(
                    id=endpoint.id,
                    url=endpoint.url,
                    secrets=list(endpoint.secrets),
                    events=list(endpoint.events),
                    keys=list(endpoint.keys) if endpoint.keys is not None else None,
                    description=endpoint.description,
                    enabled=endpoint.enabled,
                    disabled_reason=endpoint.disabled_reason,
                    created_at=endpoint.created_at,
                    updated_at=endpoint.updated_at,
                )
            )

    @uninterrupted
    async def set_enabled(
        self, endpoint_id: str, *, enabled: bool, reason: str | None, now: datetime
    ) -> EndpointRecord | None:
        """Enable or disable a stored endpoint; disabling cancels its pending deliveries.
        None when there is no such endpoint."""
        async with self._write() as db:
            found = await db.execute(
                update(WebhookEndpointRow)
                .where(WebhookEndpointRow.id == endpoint_id)
                .values(
                    enabled=enabled, disabled_reason=None if enabled else reason, updated_at=now
                )
            )
            if not getattr(found, "rowcount", 0):
                return None
            if not enabled:
                await self._cancel(db, endpoint_id, f"the endpoint was disabled: {reason}", now)
            row = await db.get(WebhookEndpointRow, endpoint_id, populate_existing=True)
        assert row is not None
        return _endpoint(row)

    @uninterrupted
    async def set_secrets(
        self, endpoint_id: str, secrets: Sequence[str], *, now: datetime
    ) -> EndpointRecord | None:
        """Replace a stored endpoint's secrets (the first signs first); None when there is no
        such endpoint."""
        async with self._write() as db:
            await db.execute(
                update(WebhookEndpointRow)
                .where(WebhookEndpointRow.id == endpoint_id)
                .values(secrets=list(secrets), updated_at=now)
            )
            row = await db.get(WebhookEndpointRow, endpoint_id, populate_existing=True)
        return _endpoint(row) if row is not None else None

    async def _cancel(self, db: AsyncSession, endpoint_id: str, why: str, now: datetime) -> None:
        await db.execute(
            update(D)
            .where(D.endpoint_id == endpoint_id, D.status == "pending")
            .values(
                status="cancelled",
                last_error=why,
                lease_holder=None,
                lease_until_s=None,
                updated_at=now,
                finished_at=now,
            )
        )

    @uninterrupted
    async def cancel_pending(self, endpoint_id: str, *, why: str, now: datetime) -> None:
        """End every pending delivery to the endpoint (it answered 410 Gone)."""
        async with self._write() as db:
            await self._cancel(db, endpoint_id, why, now)

    # --- the outbox ---------------------------------------------------------------------------

    @uninterrupted
    async def enqueue(self, message: OutboxMessage, *, now: datetime) -> None:
        """Store a message outside any event (a test message)."""
        async with self._write() as db:
            db.add(
                WebhookMessageRow(
                    id=message.id,
                    session_id=message.session_id,
                    seq=message.seq,
                    type=message.type,
                    payload=message.payload,
                    endpoint_id=message.endpoint_id,
                    routed=False,
                    created_at=now,
                )
            )

    @uninterrupted
    async def has_unrouted(self) -> bool:
        async with self._read() as db:
            found = await db.scalar(select(M.id).where(M.routed.is_(False)).limit(1))
        return found is not None

    @uninterrupted
    async def route(
        self,
        choose: Callable[[MessageHead], Sequence[str]],
        *,
        now: datetime,
        holder: str,
        free: Mapping[str, int],
        lease_s: float,
    ) -> list[ClaimedDelivery]:
        """Give the oldest unrouted messages their deliveries (one to each endpoint ``choose``
        names, due now) and mark them routed, in one transaction (a message no endpoint wants
        is left routed with none, for retention to delete). Deliveries to an endpoint with
        slots in ``free`` are leased to ``holder`` at once, as many as it has: they are
        returned, to be sent now (the others wait to be claimed).

        On PostgreSQL the messages are taken by the transaction's first statement (``FOR
        UPDATE SKIP LOCKED``: another replica routes others). A SQLite file has one gateway:
        what to write is read first, so that the write lock is held for the writes alone
        (the event log's writer waits for it meanwhile)."""
        oldest = (
            select(M.id)
            .where(M.routed.is_(False))
            .order_by(M.created_at)
            .limit(ROUTE_BATCH)
            .with_for_update(skip_locked=True)
        )
        columns = (M.id, M.type, M.session_id, M.endpoint_id, M.payload)
        sqlite = self.engine.url.get_backend_name() == "sqlite"
        async with self._write() as db:
            if sqlite:
                taken = (await db.execute(select(*columns).where(M.id.in_(oldest)))).all()
            else:
                taken = (
                    await db.execute(
                        update(M)
                        .where(M.id.in_(oldest.scalar_subquery()))
                        .values(routed=True)
                        .returning(*columns)
                    )
                ).all()
            if not taken:
                return []
            sessions = {row[2] for row in taken if row[2] is not None}
            owners: dict[str, str | None] = {}
            if sessions:
                query = select(SessionRow.id, SessionRow.owner).where(SessionRow.id.in_(sessions))
                owners = {sid: owner for sid, owner in (await db.execute(query)).all()}
            now_s = float(await db.scalar(select(self._now_s())) or 0.0)
            made, leased = _deliveries(
                taken,
                owners,
                choose,
                now=now,
                now_s=now_s,
                holder=holder,
                free=free,
                lease_s=lease_s,
            )
            if made:
                await db.execute(insert(D), made)
            if sqlite:
                await db.execute(
                    update(M).where(M.id.in_([row[0] for row in taken])).values(routed=True)
                )
        return leased

    # --- deliveries -----------------------------------------------------------------------------

    def _due(self) -> ColumnElement[bool]:
        now = self._now_s()
        return (
            (D.status == "pending")
            & (D.next_attempt_s <= now)
            & or_(D.lease_until_s.is_(None), D.lease_until_s < now)
        )

    @uninterrupted
    async def due_endpoints(self) -> dict[str, int]:
        """The endpoints with deliveries due now (and not leased), and how many each."""
        query = select(D.endpoint_id, func.count()).where(self._due()).group_by(D.endpoint_id)
        async with self._read() as db:
            return {e: int(n) for e, n in (await db.execute(query)).all()}

    @uninterrupted
    async def claim(
        self, endpoint_id: str, *, holder: str, limit: int, lease_s: float
    ) -> list[ClaimedDelivery]:
        """Lease up to ``limit`` due deliveries to ``endpoint_id`` to ``holder`` for
        ``lease_s``, oldest due first; what to send them with."""
        due = (
            select(D.id)
            .where(D.endpoint_id == endpoint_id, self._due())
            .order_by(D.next_attempt_s)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        async with self._write() as db:
            taken = list(
                await db.scalars(
                    update(D)
                    .where(D.id.in_(due.scalar_subquery()))
                    .values(lease_holder=holder, lease_until_s=self._now_s() + lease_s)
                    .returning(D.id)
                )
            )
        if not taken:
            return []
        async with self._read() as db:  # the lease is ours: the rest is read without a lock
            rows = (
                await db.execute(
                    select(D.id, D.message_id, D.type, D.attempts, M.payload)
                    .join(M, M.id == D.message_id)
                    .where(D.id.in_(taken))
                    .order_by(D.next_attempt_s)
                )
            ).all()
        return [
            ClaimedDelivery(
                id=delivery_id,
                message_id=message_id,
                endpoint_id=endpoint_id,
                type=kind,
                payload=payload,
                attempts=attempts,
            )
            for delivery_id, message_id, kind, attempts, payload in rows
        ]

    @uninterrupted
    async def finish_attempt(
        self,
        delivery_id: str,
        *,
        holder: str,
        status: DeliveryStatus,
        retry_in_s: float | None,
        status_code: int | None,
        error: str | None,
        now: datetime,
    ) -> bool:
        """Record an attempt: ``succeeded`` (whoever holds the lease now: it was delivered),
        ``failed`` for good, or ``pending`` again in ``retry_in_s`` (only while ``holder``
        still holds the lease). False when nothing was recorded."""
        values: dict[str, object] = {
            "attempts": D.attempts + 1,
            "lease_holder": None,
            "lease_until_s": None,
            "last_status_code": status_code,
            "last_error": error,
            "sent_by": holder,
            "updated_at": now,
            "status": status,
        }
        where = [D.id == delivery_id, D.status == "pending"]
        if status == "pending":
            assert retry_in_s is not None
            values["next_attempt_s"] = self._now_s() + retry_in_s
        else:
            values["finished_at"] = now
        if status != "succeeded":
            where.append(D.lease_holder == holder)
        async with self._write() as db:
            found = await db.execute(update(D).where(*where).values(values))
        return bool(getattr(found, "rowcount", 0))

    @uninterrupted
    async def release_leases(self, holder: str | None) -> int:
        """Give back the leases ``holder`` (None: anyone) holds: at start-up, from a previous
        run of this gateway that was killed mid-send."""
        query = update(D).where(D.status == "pending", D.lease_holder.is_not(None))
        if holder is not None:
            query = query.where(D.lease_holder == holder)
        async with self._write() as db:
            found = await db.execute(query.values(lease_holder=None, lease_until_s=None))
        return int(getattr(found, "rowcount", 0) or 0)

    @uninterrupted
    async def deliveries(
        self,
        endpoint_id: str,
        *,
        status: DeliveryStatus | None,
        limit: int,
        before: datetime | None,
    ) -> list[DeliveryRecord]:
        """The endpoint's deliveries, newest first, created before ``before``."""
        query = select(D).where(D.endpoint_id == endpoint_id)
        if status is not None:
            query = query.where(D.status == status)
        if before is not None:
            query = query.where(D.created_at < before)
        query = query.order_by(D.created_at.desc(), D.id.desc()).limit(limit)
        async with self._read() as db:
            now_s = float(await db.scalar(select(self._now_s())) or 0.0)
            return [_delivery(row, now_s) for row in await db.scalars(query)]

    @uninterrupted
    async def backlog(self) -> tuple[int, int]:
        """``(unrouted messages, pending deliveries)``."""
        async with self._read() as db:
            unrouted = await db.scalar(select(func.count()).where(M.routed.is_(False)))
            pending = await db.scalar(select(func.count()).where(D.status == "pending"))
        return int(unrouted or 0), int(pending or 0)

    @uninterrupted
    async def forget(self, *, before: datetime) -> int:
        """Delete the deliveries made before ``before`` (whatever became of them: the retry
        schedule is far shorter than retention), and the routed messages created before it
        that have no delivery left. Returns the deliveries deleted."""
        async with self._write() as db:
            found = await db.execute(delete(D).where(D.created_at < before))
            await db.execute(
                delete(M).where(
                    M.routed.is_(True),
                    M.created_at < before,
                    ~select(D.id).where(D.message_id == M.id).exists(),
                )
            )
        return int(getattr(found, "rowcount", 0) or 0)

"""Requests sent with an ``Idempotency-Key``, decided in the database.

    claim_request    INSERT … ON CONFLICT DO NOTHING: the primary key (key name, idempotency
                     key) lets exactly one copy of a request in, on every replica; the others
                     read the row that won
    retake_request   take over a row whose request can no longer answer (expired, or held by
                     a replica that stopped): only if the row is still as it was read
    finish_request   keep the answer (``done``), if the claim still holds the key
    release_request  forget an in-flight request that ended without an answer to keep

Every call is one short transaction; what the rows mean is app/runtime/idempotency.py's.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Insert, delete, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import IdempotencyKeyInUse
from app.records import IdempotencyRecord
from app.store.calls import uninterrupted
from app.store.tables import IdempotencyRow
from app.store.transactions import Transactions

CLAIM_TRIES = 3
"""Inserts a claim tries when the row in its way keeps going away under it."""


def _record(row: IdempotencyRow) -> IdempotencyRecord:
    return IdempotencyRecord(
        owner=row.owner,
        key=row.key,
        request=row.request,
        fingerprint=row.fingerprint,
        state=row.state,
        holder=row.holder,
        created_at=row.created_at,
        expires_at=row.expires_at,
        status=row.status,
        headers=row.headers,
        body=row.body,
    )


def _columns(record: IdempotencyRecord) -> dict[str, Any]:
    return {
        "owner": record.owner,
        "key": record.key,
        "request": record.request,
        "fingerprint": record.fingerprint,
        "state": record.state,
        "holder": record.holder,
        "created_at": record.created_at,
        "expires_at": record.expires_at,
        "status": record.status,
        "headers": record.headers,
        "body": record.body,
    }


def _insert_new(dialect: str) -> Insert:
    key = [IdempotencyRow.owner, IdempotencyRow.key]
    if dialect == "sqlite":
        return sqlite.insert(IdempotencyRow).on_conflict_do_nothing(index_elements=key)
    if dialect == "postgresql":
        return postgresql.insert(IdempotencyRow).on_conflict_do_nothing(index_elements=key)
    raise NotImplementedError(f"no idempotency insert for the {dialect!r} dialect")


def _claimed(record: IdempotencyRecord) -> tuple[ColumnElement[bool], ...]:
    """The row ``record`` claimed, while that claim holds it."""
    return (
        IdempotencyRow.owner == record.owner,
        IdempotencyRow.key == record.key,
        IdempotencyRow.holder == record.holder,
        IdempotencyRow.created_at == record.created_at,
        IdempotencyRow.state == "in_flight",
    )


class IdempotencyKeys(Transactions):
    """The ``idempotency_keys`` table."""

    async def _get(self, db: AsyncSession, owner: str, key: str) -> IdempotencyRecord | None:
        row = await db.get(IdempotencyRow, (owner, key), populate_existing=True)
        return None if row is None else _record(row)

    @uninterrupted
    async def claim_request(self, record: IdempotencyRecord) -> IdempotencyRecord | None:
        """Store ``record`` (in flight) unless its key is taken; None when it was stored, else
        the row that holds the key."""
        async with self._write() as db:
            statement = _insert_new(db.get_bind().dialect.name).values(**_columns(record))
            for _ in range(CLAIM_TRIES):
                inserted = await db.execute(statement)
                if getattr(inserted, "rowcount", 0):
                    return None
                found = await self._get(db, record.owner, record.key)
                if found is not None:
                    return found
                # The row that held the key was released meanwhile: try again.
        raise IdempotencyKeyInUse(
            "requests with this Idempotency-Key keep arriving; send it again in a moment",
            retry_after_s=1,
        )

    @uninterrupted
    async def retake_request(self, record: IdempotencyRecord, *, was: IdempotencyRecord) -> bool:
        """Replace the row ``was`` (as it was read) with ``record``; False when it changed
        meanwhile (another copy of the request took it, or its holder finished it)."""
        async with self._write() as db:
            changed = await db.execute(
                update(IdempotencyRow)
                .where(
                    IdempotencyRow.owner == was.owner,
                    IdempotencyRow.key == was.key,
                    IdempotencyRow.holder == was.holder,
                    IdempotencyRow.state == was.state,
                    IdempotencyRow.created_at == was.created_at,
                )
                .values(**_columns(record))
            )
            return bool(getattr(changed, "rowcount", 0))

    @uninterrupted
    async def finish_request(
        self, claimed: IdempotencyRecord, *, status: int, headers: dict[str, Any], body: str
    ) -> bool:
        """Keep the answer of the request ``claimed`` (as claimed); False when that claim
        holds the key no more (it was forgotten, or retaken)."""
        async with self._write() as db:
            changed = await db.execute(
                update(IdempotencyRow)
                .where(*_claimed(claimed))
                .values(state="done", status=status, headers=headers, body=body)
            )
            return bool(getattr(changed, "rowcount", 0))

    @uninterrupted
    async def release_request(self, claimed: IdempotencyRecord) -> None:
        """Forget the request ``claimed`` (it ended with nothing to keep), if the claim still
        holds its key."""
        async with self._write() as db:
            await db.execute(delete(IdempotencyRow).where(*_claimed(claimed)))

    @uninterrupted
    async def release_requests_of(self, holder: str | None) -> int:
        """Forget the in-flight requests of ``holder`` (None: of anyone), which died with a
        previous process of this gateway; how many."""
        query = delete(IdempotencyRow).where(IdempotencyRow.state == "in_flight")
        if holder is not None:
            query = query.where(IdempotencyRow.holder == holder)
        async with self._write() as db:
            deleted = await db.execute(query)
            return int(getattr(deleted, "rowcount", 0))

"""The event log's queries: append, pages in wire form, sizes, bounds and the fencing token."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import func, select

from app.events import encode_event
from app.records import EventRecord, StoredEvent
from app.store.calls import run_to_completion, uninterrupted
from app.store.db import storage_errors
from app.store.eventfile import EventFile, PageRow
from app.store.outbox import OutboxMessage, outbox_rows
from app.store.pages import fitting, stored_size
from app.store.tables import EventRow, SessionRow
from app.store.transactions import Transactions


class EventQueries(Transactions):
    """The event log of every session, as stored."""

    async def insert_events(
        self,
        records: Sequence[EventRecord],
        *,
        prune_through: Mapping[str, int] | None = None,
        fences: Mapping[str, int] | None = None,
        outbox: Sequence[OutboxMessage] = (),
    ) -> None:
        """Append events (of one or more sessions) in one transaction, advancing each
        session's ``last_seq`` to its newest one; ``prune_through`` maps a session to the seq
        up to which its older events are deleted in the same transaction. ``fences`` maps a
        session to the claim token its events are written under: a session claimed since by a
        newer claim fails the whole call with ``SessionFenced`` and nothing is written.
        ``outbox``: the webhook messages of these events (app/store/outbox.py), written in
        the same transaction.

        Written by the event log's own access (``EventFile`` on SQLite, ``EventTable`` on
        PostgreSQL); runs to its end even when the caller is cancelled."""
        if not records and not outbox:
            return
        rows = [
            (r.session_id, r.seq, r.turn_id, r.attempt, r.provider, r.at_text, r.type, r.data_json)
            for r in records
        ]
        events = self._event_file()
        if isinstance(events, EventFile):
            # classifies and shields itself
            await events.write(rows, prune_through, fences, outbox_rows(outbox))
            return
        with storage_errors():
            await run_to_completion(events.write(rows, prune_through, fences, outbox_rows(outbox)))

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

"""The event log's table on PostgreSQL: a batch is one statement per step, arrays in, rows out.

What ``EventFile`` is for a SQLite file, this is for a server database: ``write`` stores a
batch of events (of any number of sessions) in one transaction of three statements, each
taking whole columns as arrays through ``unnest``, so a batch of a thousand deltas costs three
round trips, not a thousand:

    INSERT … SELECT FROM unnest(session_ids, seqs, …)      the rows
    UPDATE sessions … FROM unnest(ids, newest)              each session's last_seq, never back
    DELETE FROM events … USING unnest(ids, through)         pruning, when asked

(after ``SELECT … FOR SHARE`` of the sessions' fencing tokens, when the writer holds claims).

``(session_id, seq)`` is the primary key: a second writer that numbered the same seq fails
its whole batch rather than interleave. ``page`` reads a replay page as plain rows, the
payload as the JSON text it was written as (a ``json`` column keeps its input verbatim) and
the time in ``stored_time`` form, as the SQLite reader returns them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.errors import SessionFenced
from app.store.eventfile import EventRow, PageRow
from app.store.outbox import POSTGRES_INSERT as _OUTBOX
from app.store.outbox import OutboxRow, outbox_columns

_INSERT = (
    "INSERT INTO events (session_id, seq, turn_id, attempt, provider, at, type, data) "
    "SELECT s, q, t, a, p, w::timestamp, y, d::json FROM unnest("
    "$1::text[], $2::int[], $3::text[], $4::int[], $5::text[], $6::text[], $7::text[], "
    "$8::text[]) AS u(s, q, t, a, p, w, y, d)"
)
_ADVANCE = (
    "UPDATE sessions SET last_seq = greatest(sessions.last_seq, v.seq) "
    "FROM unnest($1::text[], $2::int[]) AS v(id, seq) WHERE sessions.id = v.id"
)
_PRUNE = (
    "DELETE FROM events USING unnest($1::text[], $2::int[]) AS p(id, seq) "
    "WHERE events.session_id = p.id AND events.seq <= p.seq"
)
_FENCES = "SELECT id, fence FROM sessions WHERE id = ANY($1::text[]) FOR SHARE"
_PAGE = (
    "SELECT seq, turn_id, attempt, provider, at, type, data::text FROM events "
    "WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"
)

_BACKWARDS = (
    "SELECT seq, turn_id, attempt, provider, at, type, data::text FROM events "
    "WHERE session_id = $1 AND seq < $2::bigint AND type = ANY($3::text[]) "
    "ORDER BY seq DESC LIMIT $4"
)


class EventTable:
    """The ``events`` table of a server database, through the app's engine."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def write(
        self,
        rows: Sequence[EventRow],
        prune_through: Mapping[str, int] | None = None,
        fences: Mapping[str, int] | None = None,
        outbox: Sequence[OutboxRow] = (),
    ) -> None:
        """Insert ``rows`` (and the webhook messages ``outbox``), advance each session's
        ``last_seq`` to its newest row and delete what ``prune_through`` says, all or nothing
        (the caller classifies failures). With ``fences`` (session → the writer's claim
        token), a session claimed since under a newer token fails the whole write with
        ``SessionFenced``; the rows read lock the sessions, so a claim waits for this write to
        end and then sees its events."""
        newest: dict[str, int] = {}
        for row in rows:
            newest[row[0]] = max(row[1], newest.get(row[0], 0))
        columns = tuple(list(column) for column in zip(*rows, strict=True))
        async with self._engine.begin() as connection:
            if fences:
                found = await connection.exec_driver_sql(_FENCES, (list(fences),))
                claimed: list[tuple[Any, ...]] = [tuple(row) for row in found.all()]
                fenced = [sid for sid, fence in claimed if fence > fences[sid]]
                if fenced:
                    raise SessionFenced(fenced)
            if rows:
                await connection.exec_driver_sql(_INSERT, columns)
                await connection.exec_driver_sql(_ADVANCE, (list(newest), list(newest.values())))
            if outbox:
                await connection.exec_driver_sql(_OUTBOX, outbox_columns(outbox))
            if prune_through:
                await connection.exec_driver_sql(
                    _PRUNE, (list(prune_through), list(prune_through.values()))
                )

    async def page(self, session_id: str, *, after: int, limit: int) -> list[PageRow]:
        """Up to ``limit`` of the session's events with ``seq > after``, oldest first."""
        async with self._engine.connect() as connection:
            result = await connection.exec_driver_sql(_PAGE, (session_id, after, limit))
            rows: list[tuple[Any, ...]] = [tuple(row) for row in result.all()]
        return [
            (seq, turn_id, attempt, provider, _stored(at), kind, data)
            for seq, turn_id, attempt, provider, at, kind, data in rows
        ]

    async def page_backwards(
        self, session_id: str, *, before: int, types: Sequence[str], limit: int
    ) -> list[PageRow]:
        """Up to ``limit`` of the session's events of ``types`` with ``seq < before``, newest
        first."""
        async with self._engine.connect() as connection:
            result = await connection.exec_driver_sql(
                _BACKWARDS, (session_id, before, list(types), limit)
            )
            rows: list[tuple[Any, ...]] = [tuple(row) for row in result.all()]
        return [
            (seq, turn_id, attempt, provider, _stored(at), kind, data)
            for seq, turn_id, attempt, provider, at, kind, data in rows
        ]

    def close(self) -> None:
        """Nothing of its own to close: the engine's pool holds the connections."""


def _stored(at: datetime) -> str:
    """A naive UTC timestamp as ``stored_time`` writes it (``YYYY-MM-DD HH:MM:SS.ffffff``)."""
    return at.isoformat(" ", "microseconds")[:26]

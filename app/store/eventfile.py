"""The event log's table through connections of its own: a writer and a reader thread.

A streaming CLI produces thousands of events a second and each must be stored before any
subscriber sees it, so the time from "queued" to "committed" is on every event's path. Going
through the async engine costs a thread hop per statement (``BEGIN``, insert, update,
``COMMIT``) plus SQLAlchemy's ORM/Core work per row; here a whole batch is one call into one
dedicated thread, where ``sqlite3`` runs the transaction with the GIL released for SQLite's
own work. Replays read thousands of rows the same way: a page is one call into a second
thread with a connection of its own (WAL lets it read while the writer writes), returning
plain tuples.

Both connections use the same pragmas as the engine's (WAL, foreign keys, 30 s busy wait,
``synchronous=NORMAL``), so the writer is one more writer that SQLite serialises with the
pool's.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from app.errors import SessionFenced
from app.store.db import SQLITE_PRAGMAS, storage_unavailable
from app.store.outbox import SQLITE_INSERT as _OUTBOX
from app.store.outbox import OutboxRow

_INSERT = (
    "INSERT INTO events (session_id, seq, turn_id, attempt, provider, at, type, data) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_ADVANCE = "UPDATE sessions SET last_seq = ? WHERE id = ?"
_PRUNE = "DELETE FROM events WHERE session_id = ? AND seq <= ?"
_FENCE = "SELECT fence FROM sessions WHERE id = ?"
_PAGE = (
    "SELECT seq, turn_id, attempt, provider, at, type, data FROM events "
    "WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)

_BACKWARDS = (
    "SELECT seq, turn_id, attempt, provider, at, type, data FROM events "
    "WHERE session_id = ? AND seq < ? AND type IN ({types}) ORDER BY seq DESC LIMIT ?"
)

EventRow = tuple[str, int, str | None, int | None, str | None, str, str, str]
"""``(session_id, seq, turn_id, attempt, provider, at, type, data)``, ``data`` as JSON text."""
PageRow = tuple[int, str | None, int | None, str | None, str, str, str]
"""``(seq, turn_id, attempt, provider, at, type, data)`` as stored (``at`` and ``data`` text)."""


class EventFile:
    """The ``events`` table of a SQLite file: ``write`` appends, one transaction per call and
    one call at a time; ``page`` reads, on a thread and a connection of its own."""

    def __init__(self, database: str) -> None:
        self._database = database
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="event-writer")
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="event-reader")
        self._connection: sqlite3.Connection | None = None
        self._read_connection: sqlite3.Connection | None = None

    async def write(
        self,
        rows: Sequence[EventRow],
        prune_through: Mapping[str, int] | None = None,
        fences: Mapping[str, int] | None = None,
        outbox: Sequence[OutboxRow] = (),
    ) -> None:
        """Insert ``rows`` (and the webhook messages ``outbox``), advance each session's
        ``last_seq`` to its newest row and delete what ``prune_through`` says, all or nothing.
        With ``fences`` (session → the writer's claim token), a session claimed since under a
        newer token fails the whole write with ``SessionFenced``.

        A database that cannot take the write (disk full, I/O error, locked past the busy
        timeout) raises ``StorageUnavailable``; any other database error is raised as it is.
        Cancelling the caller does not stop the transaction: it runs to its end in the thread.
        """
        future = asyncio.wrap_future(
            self._executor.submit(
                self._write, rows, dict(prune_through or {}), dict(fences or {}), outbox
            )
        )
        try:
            await asyncio.shield(future)
        except sqlite3.Error as exc:
            raise storage_unavailable(exc) or exc from exc

    async def page(self, session_id: str, *, after: int, limit: int) -> list[PageRow]:
        """Up to ``limit`` of the session's events with ``seq > after``, oldest first.

        A caller cancelled meanwhile only drops the result: the read ends in its thread and
        leaves the connection as it was (no pooled connection, no transaction)."""
        future = asyncio.wrap_future(self._reader.submit(self._page, session_id, after, limit))
        try:
            return await future
        except sqlite3.Error as exc:
            raise storage_unavailable(exc) or exc from exc

    async def page_backwards(
        self, session_id: str, *, before: int, types: Sequence[str], limit: int
    ) -> list[PageRow]:
        """Up to ``limit`` of the session's events of ``types`` with ``seq < before``, newest
        first (read like ``page``)."""
        future = asyncio.wrap_future(
            self._reader.submit(self._page_backwards, session_id, before, tuple(types), limit)
        )
        try:
            return await future
        except sqlite3.Error as exc:
            raise storage_unavailable(exc) or exc from exc

    def close(self) -> None:
        """Close the connections and stop the threads (waits for a write under way)."""
        self._reader.submit(self._disconnect_reader)
        self._reader.shutdown(wait=True)
        self._executor.submit(self._disconnect)
        self._executor.shutdown(wait=True)

    # --- in the reader thread ------------------------------------------------------------------

    def _page(self, session_id: str, after: int, limit: int) -> list[PageRow]:
        if self._read_connection is None:
            self._read_connection = self._connect()
        return self._read_connection.execute(_PAGE, (session_id, after, limit)).fetchall()

    def _page_backwards(
        self, session_id: str, before: int, types: tuple[str, ...], limit: int
    ) -> list[PageRow]:
        if self._read_connection is None:
            self._read_connection = self._connect()
        query = _BACKWARDS.format(types=", ".join("?" * len(types)))
        return self._read_connection.execute(query, (session_id, before, *types, limit)).fetchall()

    def _disconnect_reader(self) -> None:
        if self._read_connection is not None:
            self._read_connection.close()
            self._read_connection = None

    # --- in the writer thread ------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: no implicit transactions, the statements below say BEGIN/COMMIT.
        connection = sqlite3.connect(
            self._database, timeout=30, isolation_level=None, check_same_thread=False
        )
        for name, value in SQLITE_PRAGMAS.items():
            connection.execute(f"PRAGMA {name}={value}")
        return connection

    def _disconnect(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _write(
        self,
        rows: Sequence[EventRow],
        prune_through: dict[str, int],
        fences: dict[str, int],
        outbox: Sequence[OutboxRow],
    ) -> None:
        if self._connection is None:
            self._connection = self._connect()
        connection = self._connection
        newest: dict[str, int] = {}
        for row in rows:
            newest[row[0]] = max(row[1], newest.get(row[0], 0))
        # IMMEDIATE takes the write lock up front: waiting for it happens under the busy
        # timeout, never as a failed upgrade half-way through the transaction.
        connection.execute("BEGIN IMMEDIATE")
        try:
            fenced = [
                session_id
                for session_id, token in fences.items()
                if (found := connection.execute(_FENCE, (session_id,)).fetchone()) is not None
                and found[0] > token
            ]
            if fenced:
                raise SessionFenced(fenced)
            connection.executemany(_INSERT, rows)
            if outbox:
                connection.executemany(_OUTBOX, outbox)
            connection.executemany(_ADVANCE, [(seq, sid) for sid, seq in newest.items()])
            connection.executemany(_PRUNE, list(prune_through.items()))
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise

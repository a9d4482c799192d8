"""The transactions every store query runs in, and the event log's own access per engine."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.store.calls import run_to_completion
from app.store.db import session_factory, sqlite_file, storage_errors
from app.store.eventfile import EventFile
from app.store.eventtable import EventTable


class Transactions:
    """Short transactions on an engine: ``_read`` for queries, ``_write`` for changes, and the
    event log's table access (``EventFile`` on SQLite, ``EventTable`` on PostgreSQL).

    A write the database cannot take (disk full, I/O error, still locked after the busy
    timeout) raises ``StorageUnavailable`` (503); nothing of that call is kept.
    """

    def __init__(self, engine: AsyncEngine, *, holder: str | None = None) -> None:
        self.engine = engine
        self.holder = holder
        """The replica whose sessions this store writes as their holder (several replicas:
        every write an owner makes is fenced, ``app.store.ownership``); None: one gateway."""
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

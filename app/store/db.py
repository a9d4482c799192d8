"""Engines and sessions, SQLite's pragmas, and storage faults as ``StorageUnavailable``.

The app builds one engine with ``create_engine``; schema changes use
``create_migration_engine`` (``app.store.schema`` runs them).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import Connection, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)
from sqlalchemy.pool import ConnectionPoolEntry

from app.errors import StorageUnavailable
from app.store.files import private_database

log = logging.getLogger(__name__)

SQLITE_PRAGMAS = {
    "journal_mode": "WAL",
    "foreign_keys": "ON",
    "busy_timeout": "30000",
    "synchronous": "NORMAL",
}
# A batch migration rebuilds a table (copy, DROP, rename); with foreign keys on, SQLite's
# DROP TABLE deletes the old rows first and so cascades into every child table.
_SQLITE_MIGRATION_PRAGMAS = {**SQLITE_PRAGMAS, "foreign_keys": "OFF"}


STORAGE_RETRY_AFTER_S = 30.0
"""``Retry-After`` of a request refused because the database cannot be written."""

_STORAGE_FAILURES = frozenset(
    {
        sqlite3.SQLITE_FULL,  # database or disk is full
        sqlite3.SQLITE_IOERR,  # disk I/O error (every extended I/O code shares it)
        sqlite3.SQLITE_BUSY,  # locked past the busy timeout
        sqlite3.SQLITE_LOCKED,  # a table locked by this very connection
        sqlite3.SQLITE_CANTOPEN,  # unable to open the database file
        sqlite3.SQLITE_READONLY,  # attempt to write a readonly database
    }
)
"""SQLite's primary result codes for a database that cannot take a write now; any other
error is a bug."""


def storage_unavailable(exc: BaseException) -> StorageUnavailable | None:
    """``StorageUnavailable`` (503, Retry-After) when ``exc``, a SQLite error, says the
    database cannot be written now (disk full, I/O error, locked past the busy timeout);
    None for any other error, which is a bug to be raised as it is. Classified by the
    driver's result code (``sqlite_errorcode``), never by its message."""
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int) or code & 0xFF not in _STORAGE_FAILURES:
        return None
    log.error("storage unavailable: %s (%s)", exc, getattr(exc, "sqlite_errorname", code))
    return StorageUnavailable(
        "the gateway cannot write its database now (disk full, I/O error or locked); "
        "nothing of this request was kept, retry later",
        retry_after_s=STORAGE_RETRY_AFTER_S,
    )


@contextlib.contextmanager
def storage_errors() -> Iterator[None]:
    """Turn a database that cannot be written into ``StorageUnavailable`` (503, Retry-After).

    The one place where SQLite's "disk full", I/O errors and "locked" (after the busy
    timeout) become an API answer (the event file's own connections use
    ``storage_unavailable`` too); other database errors pass through unchanged.
    """
    try:
        yield
    except DBAPIError as exc:
        unavailable = storage_unavailable(exc.orig if exc.orig is not None else exc)
        if unavailable is None:
            raise
        raise unavailable from exc


async def checkpoint(engine: AsyncEngine) -> None:
    """Fold SQLite's write-ahead log into the database file and truncate it (at shutdown)."""
    if engine.url.get_backend_name() != "sqlite":
        return
    async with engine.connect() as connection:
        await connection.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))


def create_engine(url: str) -> AsyncEngine:
    """An async engine for ``url``; for SQLite, WAL, foreign keys and a 30 s busy wait.

    A SQLite file is its user's alone (``app.store.files``): created 0600, its directory 0700
    when created here.
    """
    return _create_engine(make_url(url), SQLITE_PRAGMAS)


def create_migration_engine(url: str) -> AsyncEngine:
    """An engine for schema changes: on SQLite, foreign keys off and DDL in real transactions.

    Python's sqlite3 commits each DDL statement on its own; here the driver is put in
    autocommit mode and SQLAlchemy's ``begin`` emits ``BEGIN``, so a failing revision is rolled
    back whole. Use it for migrations only.
    """
    parsed = make_url(url)
    engine = _create_engine(parsed, _SQLITE_MIGRATION_PRAGMAS)
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine.sync_engine, "connect", _driver_autocommit)
        event.listen(engine.sync_engine, "begin", _emit_begin)
    return engine


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions whose objects stay readable after commit (``expire_on_commit=False``)."""
    return async_sessionmaker(engine, expire_on_commit=False)


def _create_engine(url: URL, pragmas: dict[str, str]) -> AsyncEngine:
    if url.get_backend_name() != "sqlite":
        return create_async_engine(url)
    _make_parent_dir(url)
    engine = create_async_engine(url, connect_args={"timeout": 30})

    def set_pragmas(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
        cursor = dbapi_connection.cursor()
        try:
            for name, value in pragmas.items():
                cursor.execute(f"PRAGMA {name}={value}")
        finally:
            cursor.close()

    event.listen(engine.sync_engine, "connect", set_pragmas)
    return engine


def sqlite_file(url: URL) -> str:
    """The path of the SQLite file ``url`` names; a clear error for anything else (the
    gateway keeps its state in a SQLite file)."""
    database = url.database
    if (
        url.get_backend_name() != "sqlite"
        or not database
        or database == ":memory:"
        or (database.startswith("file:"))
    ):
        raise ValueError(f"the gateway needs a SQLite file, not {url.render_as_string()}")
    return database


def _make_parent_dir(url: URL) -> None:
    database = url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    private_database(Path(database))


def _driver_autocommit(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    dbapi_connection.isolation_level = None


def _emit_begin(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN")

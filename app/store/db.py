"""Engines and sessions, SQLite's pragmas, and storage faults as ``StorageUnavailable``.

The app builds one engine with ``create_engine``; schema changes use
``create_migration_engine`` (``app.store.schema`` runs them). Two engines are supported: a
SQLite file (the embedded default) and PostgreSQL through asyncpg (several replicas).
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
from app.outages import DATABASE
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


DATABASE_TIMEOUT_S = 30.0
"""The longest one PostgreSQL connect or statement may take by default (``storage.timeout_s``);
as long as SQLite's busy timeout."""
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


_POSTGRES_FAILURE_CLASSES = ("08", "53", "57P", "58")
"""SQLSTATE prefixes of a PostgreSQL server that cannot serve now: connection exceptions,
insufficient resources (disk full, out of memory, too many connections), operator
intervention (shutting down, starting up) and system errors (I/O)."""
_POSTGRES_UNREACHABLE_CLASSES = ("08", "57P")
"""Of those, the server cannot be reached: connection exceptions, and a server shutting down
or starting up."""
_POSTGRES_FAILURES = frozenset(
    {
        "25006",  # read-only SQL transaction: a standby, or a primary being demoted
        "55P03",  # lock not available (lock_timeout)
        "40001",  # serialization failure
        "40P01",  # deadlock detected
    }
)


def storage_unavailable(exc: BaseException) -> StorageUnavailable | None:
    """``StorageUnavailable`` (503, Retry-After) when ``exc`` says the database cannot be
    written now; None for any other error, which is a bug to be raised as it is.

    SQLite: disk full, I/O error, locked past the busy timeout, classified by the driver's
    result code (``sqlite_errorcode``), never by its message. PostgreSQL: a server that cannot
    be reached or has lost the connection, or answers with a SQLSTATE of unavailability
    (``_POSTGRES_FAILURE_CLASSES``, ``_POSTGRES_FAILURES``).

    A server that cannot be reached is logged once per outage (``app.outages.DATABASE``: the
    first failed call, then the first call that succeeds again); any other unavailability
    once per call.
    """
    if isinstance(exc, sqlite3.Error):
        reason, unreachable = _sqlite_failure(exc), False
    else:
        reason, unreachable = _postgres_failure(exc)
    if reason is None:
        return None
    if unreachable:
        DATABASE.failed(f"{reason}: {_first_line(exc)}")
    else:
        log.error("storage unavailable: %s (%s)", exc, reason)
    return StorageUnavailable(
        "the gateway cannot write its database now (disk full, I/O error, locked or "
        "unreachable); nothing of this request was kept, retry later",
        retry_after_s=STORAGE_RETRY_AFTER_S,
    )


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def _sqlite_failure(exc: sqlite3.Error) -> str | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int) or code & 0xFF not in _STORAGE_FAILURES:
        return None
    return str(getattr(exc, "sqlite_errorname", code))


def _postgres_failure(exc: BaseException) -> tuple[str | None, bool]:
    """Why a PostgreSQL call failed for want of a server (None for any other error), and
    whether that is because the server cannot be reached (gone, refusing, shutting down,
    starting up) rather than unable to serve this call.

    Looks through the chain SQLAlchemy's asyncpg adapter builds (its DBAPI error, caused by
    asyncpg's own) for a SQLSTATE, and for the socket errors of a server that is gone."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        state = getattr(current, "sqlstate", None)
        if isinstance(state, str) and state:
            if state in _POSTGRES_FAILURES or state.startswith(_POSTGRES_FAILURE_CLASSES):
                return f"SQLSTATE {state}", state.startswith(_POSTGRES_UNREACHABLE_CLASSES)
            return None, False
        if isinstance(current, (ConnectionError, TimeoutError, OSError)):
            return type(current).__name__, True
        if type(current).__name__ in _ASYNCPG_CONNECTION_ERRORS:
            return type(current).__name__, True
        current = current.__cause__ or current.__context__
    return None, False


_ASYNCPG_CONNECTION_ERRORS = frozenset(
    {"ConnectionDoesNotExistError", "InterfaceError", "InternalClientError"}
)
"""asyncpg's errors for a connection that closed under a call (they carry no SQLSTATE)."""


@contextlib.contextmanager
def storage_errors() -> Iterator[None]:
    """Turn a database that cannot be written into ``StorageUnavailable`` (503, Retry-After).

    The one place where SQLite's "disk full", I/O errors and "locked" (after the busy
    timeout) become an API answer (the event file's own connections use
    ``storage_unavailable`` too); other database errors pass through unchanged. A call that
    gets through ends an outage of the server (``app.outages.DATABASE``).
    """
    try:
        yield
    except DBAPIError as exc:
        unavailable = storage_unavailable(exc.orig if exc.orig is not None else exc)
        if unavailable is None:
            raise
        raise unavailable from exc
    except OSError as exc:  # a database server that cannot be reached (connection refused)
        unavailable = storage_unavailable(exc)
        if unavailable is None:
            raise
        raise unavailable from exc
    DATABASE.answered()


async def checkpoint(engine: AsyncEngine) -> None:
    """Fold SQLite's write-ahead log into the database file and truncate it (at shutdown)."""
    if engine.url.get_backend_name() != "sqlite":
        return
    async with engine.connect() as connection:
        await connection.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))


def create_engine(url: str, *, timeout_s: float = DATABASE_TIMEOUT_S) -> AsyncEngine:
    """An async engine for ``url``; for SQLite, WAL, foreign keys and a 30 s busy wait; for
    PostgreSQL, connections checked before use and ``timeout_s`` on every connect and
    statement, so a server that stopped answering fails a call (503) instead of hanging it.

    A SQLite file is its user's alone (``app.store.files``): created 0600, its directory 0700
    when created here.
    """
    return _create_engine(make_url(url), SQLITE_PRAGMAS, timeout_s=timeout_s)


def create_migration_engine(url: str) -> AsyncEngine:
    """An engine for schema changes: on SQLite, foreign keys off and DDL in real transactions.

    Python's sqlite3 commits each DDL statement on its own; here the driver is put in
    autocommit mode and SQLAlchemy's ``begin`` emits ``BEGIN``, so a failing revision is rolled
    back whole. Use it for migrations only.
    """
    parsed = make_url(url)
    # A migration may rewrite big tables: no statement timeout of its own.
    engine = _create_engine(parsed, _SQLITE_MIGRATION_PRAGMAS, timeout_s=None)
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine.sync_engine, "connect", _driver_autocommit)
        event.listen(engine.sync_engine, "begin", _emit_begin)
    return engine


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions whose objects stay readable after commit (``expire_on_commit=False``)."""
    return async_sessionmaker(engine, expire_on_commit=False)


def _create_engine(url: URL, pragmas: dict[str, str], *, timeout_s: float | None) -> AsyncEngine:
    if url.get_backend_name() != "sqlite":
        # pre_ping: a pooled connection that a restarted server dropped is replaced before
        # use, so the first call after PostgreSQL comes back succeeds.
        return create_async_engine(
            url,
            pool_pre_ping=True,
            pool_size=10,
            max_overflow=20,
            pool_timeout=timeout_s or DATABASE_TIMEOUT_S,
            connect_args={
                "timeout": timeout_s or DATABASE_TIMEOUT_S,
                "command_timeout": timeout_s,
            },
        )
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

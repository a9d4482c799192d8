"""Engines, sessions and the schema gate.

The app builds one engine with ``create_engine`` and refuses to start unless ``check_schema``
passes; ``upgrade`` / ``upgrade_async`` run ``alembic upgrade head`` from code (the CLI's
``migrate`` command and, optionally, app startup). Nothing here reads the working directory:
the Alembic scripts are found next to the ``app`` package.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
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

import app
from app.errors import StorageUnavailable

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(app.__file__).resolve().parent.parent / "migrations"

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

_STORAGE_FAILURES = (
    "database or disk is full",
    "disk i/o error",
    "database is locked",
    "database table is locked",
    "unable to open database file",
    "attempt to write a readonly database",
)
"""SQLite's messages for a database that cannot take a write now; anything else is a bug."""


def storage_unavailable(exc: BaseException) -> StorageUnavailable | None:
    """``StorageUnavailable`` (503, Retry-After) when ``exc``, a SQLite error, says the
    database cannot be written now (disk full, I/O error, locked past the busy timeout);
    None for any other error, which is a bug to be raised as it is."""
    message = str(exc).lower()
    if not any(failure in message for failure in _STORAGE_FAILURES):
        return None
    log.error("storage unavailable: %s", exc)
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


class SchemaError(Exception):
    """The database's schema revision is not the one this code was written for.

    ``current`` is what the database records (empty: no schema at all), ``required`` is the head
    of ``migrations/``. The message says what to run.
    """

    def __init__(self, message: str, *, url: str, current: tuple[str, ...], required: str):
        super().__init__(message)
        self.url = url
        self.current = current
        self.required = required


def create_engine(url: str) -> AsyncEngine:
    """An async engine for ``url``; for SQLite, WAL, foreign keys and a 30 s busy wait.

    A SQLite file's parent directory is created if missing.
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


def alembic_config(url: str, *, migrations_dir: Path = MIGRATIONS_DIR) -> Config:
    """An Alembic config for ``url`` and ``migrations_dir``, built in code (no ini, no cwd)."""
    config = Config()
    config.set_main_option("script_location", str(migrations_dir))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


async def check_schema(engine: AsyncEngine, *, migrations_dir: Path = MIGRATIONS_DIR) -> None:
    """Return if the database is at the head revision of ``migrations_dir``, else raise SchemaError.

    Only reads: a database with no schema is reported, not created.
    """
    script = ScriptDirectory(str(migrations_dir))
    required = script.get_current_head()
    if required is None:
        raise RuntimeError(f"no migrations found in {migrations_dir}: the install is incomplete")
    async with engine.connect() as connection:
        current = await connection.run_sync(_current_heads)
    if current == (required,):
        return
    url = engine.url.render_as_string(hide_password=True)
    known = {revision.revision for revision in script.walk_revisions()}
    unknown = [revision for revision in current if revision not in known]
    if unknown:
        message = (
            f"this database was migrated by a newer gateway (revision {', '.join(unknown)} "
            f"unknown): upgrade the gateway or point storage.url elsewhere (database at {url})"
        )
    elif not current:
        message = f"database at {url} has no schema: run `agent-gateway migrate`"
    else:
        message = (
            f"database at {url} is at revision {', '.join(current)} but this gateway needs "
            f"{required}: run `agent-gateway migrate`"
        )
    raise SchemaError(message, url=url, current=current, required=required)


def upgrade(url: str, *, migrations_dir: Path = MIGRATIONS_DIR) -> None:
    """Migrate the database at ``url`` to head; for callers with no running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(upgrade_async(url, migrations_dir=migrations_dir))
    else:
        raise RuntimeError("upgrade() inside a running event loop: await upgrade_async()")


async def upgrade_async(url: str, *, migrations_dir: Path = MIGRATIONS_DIR) -> None:
    """Migrate the database at ``url`` to head; safe to await inside a running event loop.

    Alembic's (synchronous) env runs in ``run_sync`` on a connection of a migration engine,
    handed over through ``config.attributes["connection"]``. Each revision commits on its own:
    one that fails is rolled back and leaves the database at the revision before it.
    """
    config = alembic_config(url, migrations_dir=migrations_dir)
    engine = create_migration_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_upgrade_to_head, config)
    finally:
        await engine.dispose()


def _upgrade_to_head(connection: Connection, config: Config) -> None:
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


def _current_heads(connection: Connection) -> tuple[str, ...]:
    return MigrationContext.configure(connection).get_current_heads()


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
    Path(database).parent.mkdir(parents=True, exist_ok=True)


def _driver_autocommit(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    dbapi_connection.isolation_level = None


def _emit_begin(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN")

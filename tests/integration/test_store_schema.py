"""The schema as Alembic builds it on a real SQLite file and a real PostgreSQL database (the same
history on both), migrations under the lock, and the engines' guarantees."""

from __future__ import annotations

import asyncio
import itertools
import logging
import shutil
import sqlite3
import stat
from collections.abc import AsyncIterator
from contextlib import closing
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, delete, func, inspect, select, text
from sqlalchemy.exc import StatementError
from sqlalchemy.ext.asyncio import AsyncEngine

from app.store.db import create_engine, session_factory
from app.store.schema import (
    MIGRATIONS_DIR,
    Migration,
    SchemaError,
    check_schema,
    migrate,
    migration_lock,
    upgrade,
    upgrade_async,
)
from app.store.tables import ApprovalRow, Base, BindingRow, EventRow, SessionRow, TurnRow
from tests.dbservers import PostgresServer
from tests.integration.conftest import BACKENDS
from tests.integration.rows import session_row

NOW = datetime(2026, 5, 9, 12, 0, tzinfo=UTC)
HEAD = ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head() or ""

REBUILD_SESSIONS = """
import sqlalchemy as sa
from alembic import op

revision = "9001"
down_revision = "{head}"


def upgrade():
    # SQLite rebuilds the table (copy, drop, rename); PostgreSQL alters it in place.
    with op.batch_alter_table("sessions", recreate="auto") as batch:
        batch.alter_column("model", existing_type=sa.String(200), type_=sa.String(300))
"""

FAIL_HALFWAY = """
import sqlalchemy as sa
from alembic import op

revision = "9001"
down_revision = "{head}"


def upgrade():
    op.create_table("scratch", sa.Column("id", sa.Integer, primary_key=True))
    # SQLite: a whole table rebuild before the failure; PostgreSQL: an ALTER TABLE.
    recreate = "always" if op.get_bind().dialect.name == "sqlite" else "auto"
    with op.batch_alter_table("sessions", recreate=recreate) as batch:
        batch.add_column(sa.Column("extra", sa.Integer))
    raise RuntimeError("revision 9001 failed")
"""


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of the test's own, on each backend."""
    if request.param == "sqlite":
        return sqlite_url(tmp_path)
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.create_database(f"empty{next(_EMPTY_DATABASES)}")


_EMPTY_DATABASES = itertools.count(1)


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'gateway.db'}"


@pytest.fixture
async def engine(url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(url)
    yield engine
    await engine.dispose()


@pytest.fixture
async def migrated(url: str, engine: AsyncEngine) -> AsyncEngine:
    await upgrade_async(url)
    return engine


def migrations_with(tmp_path: Path, revision: str) -> Path:
    """A copy of ``migrations/`` with one more revision, 9001, after the head."""
    directory = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, directory, ignore=shutil.ignore_patterns("__pycache__"))
    (directory / "versions" / "9001_extra.py").write_text(revision.replace("{head}", HEAD))
    return directory


async def add_session_with_children(engine: AsyncEngine, session_id: str = "s1") -> None:
    async with session_factory(engine).begin() as db:
        db.add(session_row(session_id, at=NOW))
        await db.flush()
        db.add(
            BindingRow(
                session_id=session_id,
                provider="claude_code",
                thread_id="thread-1",
                created_at=NOW,
                updated_at=NOW,
            )
        )
        db.add(
            TurnRow(
                id=f"{session_id}-t1",
                session_id=session_id,
                seq_no=1,
                prompt="hello",
                status="running",
                provider="claude_code",
                created_at=NOW,
            )
        )
        await db.flush()
        db.add(
            ApprovalRow(
                id=f"{session_id}-a1",
                session_id=session_id,
                turn_id=f"{session_id}-t1",
                provider_request_id="req-1",
                tool="Bash",
                input={"command": "ls"},
                options=[{"decision": "allow", "label": "Allow"}],
                status="pending",
                expires_at=NOW + timedelta(minutes=5),
                created_at=NOW,
            )
        )
        db.add(EventRow(session_id=session_id, seq=1, at=NOW, type="session.created", data={}))


async def count(engine: AsyncEngine, table: type[Base]) -> int:
    async with engine.connect() as connection:
        return (await connection.execute(select(func.count()).select_from(table))).scalar_one()


async def test_migrations_build_exactly_the_models_schema(migrated: AsyncEngine) -> None:
    def diff(connection: Connection) -> list[object]:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "compare_server_default": True}
        )
        return list(compare_metadata(context, Base.metadata))

    async with migrated.connect() as connection:
        assert await connection.run_sync(diff) == []


async def test_check_schema_accepts_a_migrated_database(migrated: AsyncEngine) -> None:
    await check_schema(migrated)


async def test_check_schema_tells_how_to_migrate_an_empty_database(engine: AsyncEngine) -> None:
    with pytest.raises(
        SchemaError, match="has no schema: `agent-gateway serve` creates it"
    ) as error:
        await check_schema(engine)
    assert error.value.current == ()
    assert error.value.required == HEAD
    assert not error.value.newer


async def test_check_schema_tells_how_to_migrate_an_older_database(
    migrated: AsyncEngine, tmp_path: Path
) -> None:
    newer = migrations_with(tmp_path, REBUILD_SESSIONS)
    with pytest.raises(SchemaError, match=rf"at revision {HEAD} but this gateway needs 9001: `"):
        await check_schema(migrated, migrations_dir=newer)


async def test_check_schema_rejects_a_revision_from_a_newer_gateway(
    migrated: AsyncEngine,
) -> None:
    async with migrated.begin() as connection:
        await connection.execute(text("UPDATE alembic_version SET version_num = 'f00d'"))
    with pytest.raises(
        SchemaError, match=rf"revision f00d, which this gateway \(schema revision {HEAD}\)"
    ):
        await check_schema(migrated)


async def test_upgrading_a_migrated_database_changes_nothing(
    url: str, migrated: AsyncEngine
) -> None:
    await upgrade_async(url)
    await check_schema(migrated)


def test_sync_upgrade_runs_without_an_event_loop(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "gateway.db"
    upgrade(f"sqlite+aiosqlite:///{path}")
    with closing(sqlite3.connect(path)) as connection:
        assert connection.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD,)]


async def test_engine_turns_on_wal_foreign_keys_and_busy_wait(tmp_path: Path) -> None:
    engine = create_engine(sqlite_url(tmp_path))
    async with engine.connect() as connection:

        async def pragma(name: str) -> object:
            return (await connection.exec_driver_sql(f"PRAGMA {name}")).scalar_one()

        assert await pragma("journal_mode") == "wal"
        assert await pragma("foreign_keys") == 1
        assert await pragma("busy_timeout") == 30000
        assert await pragma("synchronous") == 1  # NORMAL
    await engine.dispose()


async def test_deleting_a_session_deletes_everything_it_owns(migrated: AsyncEngine) -> None:
    await add_session_with_children(migrated, "s1")
    await add_session_with_children(migrated, "s2")
    async with migrated.begin() as connection:
        await connection.execute(delete(SessionRow).where(SessionRow.id == "s1"))
    for table in (BindingRow, TurnRow, ApprovalRow, EventRow):
        assert await count(migrated, table) == 1, table.__tablename__


async def test_timestamps_round_trip_as_aware_utc(migrated: AsyncEngine) -> None:
    await add_session_with_children(migrated)
    plus_two = timezone(timedelta(hours=2))
    async with session_factory(migrated).begin() as db:
        row = await db.get_one(SessionRow, "s1")
        row.updated_at = datetime(2026, 5, 9, 16, 30, tzinfo=plus_two)
    async with session_factory(migrated)() as db:
        row = await db.get_one(SessionRow, "s1")
        assert row.updated_at == datetime(2026, 5, 9, 14, 30, tzinfo=UTC)
        assert row.updated_at.tzinfo is UTC
        assert row.closed_at is None


async def test_naive_timestamps_are_refused(migrated: AsyncEngine) -> None:
    naive = NOW.replace(tzinfo=None)
    async with session_factory(migrated)() as db:
        db.add(
            SessionRow(
                id="s1",
                provider="codex",
                workspace="/w",
                approval_mode="ask",
                status="idle",
                created_at=naive,
                updated_at=naive,
            )
        )
        with pytest.raises(StatementError, match="naive datetime"):
            await db.flush()


async def test_a_table_rebuilding_migration_keeps_child_rows(
    url: str, migrated: AsyncEngine, tmp_path: Path
) -> None:
    await add_session_with_children(migrated)
    await upgrade_async(url, migrations_dir=migrations_with(tmp_path, REBUILD_SESSIONS))
    for table in (SessionRow, BindingRow, TurnRow, ApprovalRow, EventRow):
        assert await count(migrated, table) == 1, table.__tablename__


async def test_a_failing_migration_is_rolled_back_whole(
    url: str, migrated: AsyncEngine, tmp_path: Path
) -> None:
    with pytest.raises(RuntimeError, match="revision 9001 failed"):
        await upgrade_async(url, migrations_dir=migrations_with(tmp_path, FAIL_HALFWAY))
    await check_schema(migrated)

    def tables_and_session_columns(connection: Connection) -> tuple[list[str], list[str]]:
        schema = inspect(connection)
        return schema.get_table_names(), [c["name"] for c in schema.get_columns("sessions")]

    async with migrated.connect() as connection:
        tables, columns = await connection.run_sync(tables_and_session_columns)
    assert "sessions" in tables
    assert "scratch" not in tables
    assert "extra" not in columns


async def test_sync_upgrade_refuses_a_running_event_loop(url: str) -> None:
    with pytest.raises(RuntimeError, match="await upgrade_async"):
        upgrade(url)


# --- migrate(): what `serve` and `migrate` run, one process at a time --------------------------


async def test_migrate_creates_a_new_database(url: str, engine: AsyncEngine) -> None:
    assert await migrate(url) == Migration(before=(), after=HEAD)
    await check_schema(engine)


async def test_migrate_upgrades_an_older_database_and_keeps_its_rows(
    url: str, migrated: AsyncEngine, tmp_path: Path
) -> None:
    await add_session_with_children(migrated)
    newer = migrations_with(tmp_path, REBUILD_SESSIONS)
    migration = await migrate(url, migrations_dir=newer)
    assert migration == Migration(before=(HEAD,), after="9001")
    assert migration.changed
    await check_schema(migrated, migrations_dir=newer)
    assert await count(migrated, SessionRow) == 1


async def test_migrate_leaves_a_current_database_alone(url: str, migrated: AsyncEngine) -> None:
    migration = await migrate(url)
    assert migration == Migration(before=(HEAD,), after=HEAD)
    assert not migration.changed


async def test_migrate_refuses_a_newer_database_naming_both_revisions(
    url: str, migrated: AsyncEngine
) -> None:
    async with migrated.begin() as connection:
        await connection.execute(text("UPDATE alembic_version SET version_num = 'f00d'"))
    with pytest.raises(SchemaError) as error:
        await migrate(url)
    assert error.value.newer
    assert (error.value.current, error.value.required) == (("f00d",), HEAD)
    assert f"revision f00d, which this gateway (schema revision {HEAD}) does not know" in str(
        error.value
    )
    async with migrated.connect() as connection:  # left exactly as it was
        version = await connection.execute(text("SELECT version_num FROM alembic_version"))
        assert version.scalars().all() == ["f00d"]


async def test_concurrent_migrations_of_a_new_database_run_once(
    url: str, engine: AsyncEngine
) -> None:
    results = await asyncio.gather(*(migrate(url) for _ in range(4)))
    assert sorted(result.changed for result in results) == [False, False, False, True]
    await check_schema(engine)


async def test_migrate_waits_for_the_lock_and_then_finds_the_work_done(
    url: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    blocked = asyncio.Event()

    class Waiting(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if getattr(record, "event", None) == "database.migration_waiting":
                blocked.set()

    handler, schema_log = Waiting(), logging.getLogger("app.store.schema")
    schema_log.addHandler(handler)
    schema_log.setLevel(logging.INFO)
    try:
        async with migration_lock(url, timeout_s=5):
            waiting = asyncio.create_task(migrate(url))
            await asyncio.wait_for(blocked.wait(), 5)  # it found the lock held
            await upgrade_async(url)  # what the holder does meanwhile
            assert not waiting.done()
        assert (await waiting).changed is False
    finally:
        schema_log.removeHandler(handler)
        schema_log.setLevel(logging.NOTSET)


async def test_the_migration_lock_of_a_sqlite_file_is_private(tmp_path: Path) -> None:
    await migrate(sqlite_url(tmp_path))
    lock = tmp_path / "gateway.db-migrate.lock"
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600


async def test_a_lock_held_too_long_is_reported(url: str) -> None:
    # Another process migrating: here the same lock, taken by this one (a second descriptor of
    # the lock file, a second PostgreSQL connection), which migrate cannot get.
    async with migration_lock(url, timeout_s=5):
        with pytest.raises(SchemaError, match="another process has been migrating"):
            await migrate(url, lock_timeout_s=0.2)
    assert (await migrate(url)).changed  # the lock went with its holder

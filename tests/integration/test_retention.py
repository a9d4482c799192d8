"""Binding upserts and retention cleanup against a migrated database, SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.providers.sandboxing import forget_homes
from app.records import SessionStatus
from app.runtime.history import history_for
from app.settings import Settings
from app.store.bindings import touch_binding
from app.store.db import create_engine, session_factory
from app.store.retention import CleanupReport, cleanup
from app.store.tables import BindingRow, EventRow, SessionRow

NOW = datetime(2026, 5, 9, 12, 0, tzinfo=UTC)
RETENTION_DAYS = 30


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    """A migrated database of the test's own, on each backend (tests/integration/conftest.py)."""
    engine = create_engine(database_url)
    yield engine
    await engine.dispose()


async def add_session(
    engine: AsyncEngine,
    session_id: str,
    *,
    status: SessionStatus = "idle",
    bound_days_ago: int | None,
    events: int = 2,
) -> None:
    """A session created 40 days ago, bound (if asked) ``bound_days_ago``, with ``events``."""
    created = NOW - timedelta(days=40)
    async with session_factory(engine).begin() as db:
        db.add(
            SessionRow(
                id=session_id,
                provider="codex",
                workspace="/work/project",
                approval_mode="ask",
                status=status,
                last_seq=events,
                created_at=created,
                updated_at=created,
                closed_at=created if status in ("closed", "failed") else None,
            )
        )
        await db.flush()
        if bound_days_ago is not None:
            await touch_binding(
                db,
                session_id=session_id,
                provider="codex",
                thread_id=f"thread-{session_id}",
                now=NOW - timedelta(days=bound_days_ago),
            )
        for seq in range(1, events + 1):
            db.add(EventRow(session_id=session_id, seq=seq, at=created, type="warning", data={}))


async def run_cleanup(engine: AsyncEngine) -> CleanupReport:
    return await cleanup(engine, retention_days=RETENTION_DAYS, now=NOW)


async def bindings(engine: AsyncEngine) -> dict[str, BindingRow]:
    async with session_factory(engine)() as db:
        rows = (await db.scalars(select(BindingRow))).all()
    return {row.session_id: row for row in rows}


async def session_row(engine: AsyncEngine, session_id: str) -> SessionRow:
    async with session_factory(engine)() as db:
        return await db.get_one(SessionRow, session_id)


async def event_count(engine: AsyncEngine, session_id: str) -> int:
    async with engine.connect() as connection:
        query = select(func.count()).where(EventRow.session_id == session_id)
        return (await connection.execute(query)).scalar_one()


async def test_binding_unused_past_the_period_is_deleted_and_a_recent_one_kept(
    engine: AsyncEngine,
) -> None:
    await add_session(engine, "old", bound_days_ago=31)
    await add_session(engine, "recent", bound_days_ago=29)

    report = await run_cleanup(engine)

    assert set(await bindings(engine)) == {"recent"}
    assert report == CleanupReport(bindings_deleted=1, events_deleted=2, sessions_closed=1)
    assert await event_count(engine, "recent") == 2


async def test_using_a_binding_keeps_it_past_cleanup(engine: AsyncEngine) -> None:
    await add_session(engine, "s1", bound_days_ago=31)
    async with session_factory(engine).begin() as db:
        await touch_binding(db, session_id="s1", provider="codex", thread_id="thread-s1", now=NOW)

    report = await run_cleanup(engine)

    assert set(await bindings(engine)) == {"s1"}
    assert report == CleanupReport(bindings_deleted=0, events_deleted=0, sessions_closed=0)
    assert (await session_row(engine, "s1")).status == "idle"


@pytest.mark.parametrize("status", ["closed", "failed"])
async def test_ended_session_loses_its_events_and_keeps_its_status(
    engine: AsyncEngine, status: SessionStatus
) -> None:
    await add_session(engine, "ended", status=status, bound_days_ago=31, events=3)

    report = await run_cleanup(engine)

    assert report == CleanupReport(bindings_deleted=1, events_deleted=3, sessions_closed=0)
    assert await event_count(engine, "ended") == 0
    row = await session_row(engine, "ended")
    assert row.status == status
    assert row.closed_at == NOW - timedelta(days=40)


async def test_open_session_that_lost_its_thread_is_closed(engine: AsyncEngine) -> None:
    await add_session(engine, "open", status="awaiting_approval", bound_days_ago=31)

    report = await run_cleanup(engine)

    assert report == CleanupReport(bindings_deleted=1, events_deleted=2, sessions_closed=1)
    assert await event_count(engine, "open") == 0
    row = await session_row(engine, "open")
    assert row.status == "closed"
    assert row.closed_at == NOW
    assert row.updated_at == NOW


async def test_session_still_bound_to_another_provider_is_left_alone(
    engine: AsyncEngine,
) -> None:
    await add_session(engine, "switched", bound_days_ago=31)
    async with session_factory(engine).begin() as db:
        await touch_binding(
            db, session_id="switched", provider="opencode", thread_id="ses_1", now=NOW
        )

    report = await run_cleanup(engine)

    assert report == CleanupReport(bindings_deleted=1, events_deleted=0, sessions_closed=0)
    assert await event_count(engine, "switched") == 2
    assert (await session_row(engine, "switched")).status == "idle"


async def test_sessions_that_never_bound_a_thread_are_left_alone(engine: AsyncEngine) -> None:
    await add_session(engine, "unbound", bound_days_ago=None)

    report = await run_cleanup(engine)

    assert report == CleanupReport(bindings_deleted=0, events_deleted=0, sessions_closed=0)
    assert await event_count(engine, "unbound") == 2


async def test_touching_a_binding_moves_thread_and_last_use_but_keeps_created_at(
    engine: AsyncEngine,
) -> None:
    await add_session(engine, "s1", bound_days_ago=10)
    async with session_factory(engine).begin() as db:
        await touch_binding(db, session_id="s1", provider="codex", thread_id="thread-2", now=NOW)

    binding = (await bindings(engine))["s1"]
    assert binding.thread_id == "thread-2"
    assert binding.created_at == NOW - timedelta(days=10)
    assert binding.updated_at == NOW


async def test_retention_shorter_than_a_day_is_refused(engine: AsyncEngine) -> None:
    with pytest.raises(ValueError, match="retention_days must be at least 1"):
        await cleanup(engine, retention_days=0, now=NOW)


async def test_the_sessions_retention_forgets_lose_their_cli_homes(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    await add_session(engine, "old", bound_days_ago=31)
    await add_session(engine, "recent", bound_days_ago=29)
    settings = Settings(sandbox={"homes_dir": tmp_path / "homes"})
    for session_id in ("old", "recent"):
        (settings.homes_dir / session_id / ".claude").mkdir(parents=True)

    report = await run_cleanup(engine)
    removed = forget_homes(settings, report.forgotten)

    assert report.forgotten == ("old",)
    assert removed == 1
    assert sorted(p.name for p in settings.homes_dir.iterdir()) == ["recent"]


async def test_the_sessions_retention_forgets_lose_their_workspace_records(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    await add_session(engine, "old", bound_days_ago=31)
    await add_session(engine, "recent", bound_days_ago=29)
    settings = Settings(snapshots={"dir": tmp_path / "records"})
    history = history_for(settings)
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "a.txt").write_text("a\n")
    for session_id in ("old", "recent"):
        await history.turn_started(session_id, workspace, "trn_1")

    report = await run_cleanup(engine)
    removed = history.forget(list(report.forgotten))

    assert removed == 1
    assert sorted(p.name for p in settings.snapshots_dir.iterdir() if p.name[0] != ".") == [
        "recent"
    ]

"""A store write cancelled at any point leaves no transaction open and no write lock held."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.store.db import create_engine
from app.store.repository import Store
from app.store.schema import upgrade_async
from tests.integration.rows import session_record

NOW = datetime(2026, 5, 9, 12, 0, tzinfo=UTC)


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[tuple[Store, Path]]:
    path = tmp_path / "gateway.db"
    url = f"sqlite+aiosqlite:///{path}"
    await upgrade_async(url)
    engine = create_engine(url)
    store = Store(engine)
    await store.create_session(session_record("sess-a", at=NOW))
    yield store, path
    await engine.dispose()


def write_lock_is_free(path: Path) -> bool:
    """Whether another connection can take SQLite's write lock at once."""
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        other.close()


async def test_writes_cancelled_at_every_point_leave_the_database_writable(
    database: tuple[Store, Path],
) -> None:
    store, path = database
    cancelled = 0
    for steps in range(60):  # cancel after 0, 1, 2, … turns of the event loop
        write = asyncio.create_task(store.update_session("sess-a", status="running"))
        for _ in range(steps):
            await asyncio.sleep(0)
        write.cancel()
        try:
            await write
        except asyncio.CancelledError:
            cancelled += 1
        # Whatever point the cancel reached, the connection went back to the pool finished:
        # nobody holds the write lock, and the next write goes through at once.
        assert write_lock_is_free(path), f"write lock still held after a cancel at step {steps}"
        async with asyncio.timeout(5):
            await store.update_session("sess-a", status="idle")
    assert cancelled > 0  # the cancels did land inside writes

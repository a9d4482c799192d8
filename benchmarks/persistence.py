"""Persistence cost: the event log on disk vs on tmpfs, on PostgreSQL, and vs a store that
keeps nothing.

Two measurements, because a separate gateway process cannot use an in-memory database:

- end to end: the relay throughput benchmark's gateway with ``storage.data_dir`` on the
  disk vs on ``/dev/shm`` (tmpfs: the same SQLite work, no device writes), and with
  ``storage.url`` on a private PostgreSQL server started for the run on loopback, durable as
  in production (fsync and synchronous commit on, its data directory on the disk);
- in process: ``app.runtime.eventlog.EventLog`` appending message deltas to one session, with
  the real ``Store`` on a migrated SQLite file or PostgreSQL database vs a store stub whose
  writes do nothing (what the event log itself costs: numbering, encoding, fan-out
  bookkeeping).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from app.events import MessageDelta
from app.records import SessionRecord, StoredEvent
from app.runtime.eventlog import EventLog
from app.store.db import create_engine
from app.store.repository import Store
from app.store.schema import upgrade_async
from benchmarks.harness import (
    Section,
    Table,
    Target,
    bench_gateway,
    ratio,
    running,
    scratch,
)
from benchmarks.relay import through_gateway, warm
from benchmarks.settings import RunConfig
from tests.dbservers import PostgresServer

TMPFS = "/dev/shm"  # noqa: S108 - a tmpfs on purpose: SQLite without device writes
MEASURES = __doc__.split("\n\n", 1)[1].strip() if __doc__ else ""


def postgres(directory: Path) -> PostgresServer:
    """A private, durable PostgreSQL under ``directory`` (a context manager)."""
    return PostgresServer(directory / "postgres", durable=True)


class NullStore:
    """Accepts every write and keeps nothing; reads find an empty session."""

    async def insert_events(self, *args: Any, **kwargs: Any) -> None:
        return None

    async def event_bounds(self, session_id: str) -> tuple[int, int]:
        return 1, 0

    async def events_after(self, session_id: str, *, after: int, limit: int) -> list[StoredEvent]:
        return []


async def real_store(directory: Path, url: str | None = None) -> Store:
    url = url or f"sqlite+aiosqlite:///{directory / 'gateway.db'}"
    await upgrade_async(url)
    store = Store(create_engine(url))
    now = datetime.now(UTC)
    await store.create_session(
        SessionRecord(
            id="ses_bench",
            owner=None,
            provider="claude_code",
            workspace=str(directory),
            model=None,
            approval_mode="ask",
            status="running",
            created_at=now,
            updated_at=now,
        )
    )
    return store


async def appends_per_s(store: Store, n: int, *, concurrent: int = 1) -> float:
    """``n`` appends of one session's deltas, ``concurrent`` awaited together (1: one after
    the other), then whatever flush the log offers."""
    log = EventLog(store)
    start = time.perf_counter()
    for i in range(0, n, concurrent):
        await asyncio.gather(
            *(
                log.append("ses_bench", MessageDelta(message_id="m", text=f"i={j} "))
                for j in range(i, min(n, i + concurrent))
            )
        )
    for name in ("flush", "aclose"):
        method = getattr(log, name, None)
        if method is not None:
            outcome = method()
            if inspect.isawaitable(outcome):
                await outcome
    return round(n / (time.perf_counter() - start), 1)


async def run(config: RunConfig) -> Section:
    n = config.pick(quick=1000, full=10000)
    section = Section(name="persistence", title="6. Persistence cost", measures=MEASURES)
    results: dict[str, float] = {}
    for label, base in (
        ("gateway, SQLite on disk", None),
        ("gateway, SQLite on tmpfs", TMPFS),
    ):
        with scratch("persistence", base=base) as directory:
            async with running(bench_gateway(directory)) as api:
                session = await api.create_session()
                await warm(api, session)
                result = await through_gateway(api, session, n=n, limit_s=config.timeout(n))
                results[label] = result.events_per_s
    with scratch("persistence-postgres") as directory, postgres(directory) as server:
        url = server.create_database("gateway")
        async with running(bench_gateway(directory, storage={"url": url})) as api:
            session = await api.create_session()
            await warm(api, session)
            result = await through_gateway(api, session, n=n, limit_s=config.timeout(n))
            results["gateway, PostgreSQL (durable, loopback)"] = result.events_per_s
    floor = config.shared.get("floor_events_per_s")
    rows: list[dict[str, object]] = [
        {"what": label, "events/s": rate, "x floor": ratio(rate, floor) if floor else "-"}
        for label, rate in results.items()
    ]
    in_process: dict[str, float] = {}
    m = config.pick(quick=500, full=2000)
    for where, base in (("disk", None), ("tmpfs", TMPFS)):
        for concurrent in (1, 100):
            with scratch("eventlog", base=base) as directory:
                store = await real_store(directory)
                label = f"EventLog + real Store ({where}), {concurrent} at a time"
                in_process[label] = await appends_per_s(store, m, concurrent=concurrent)
                store.close()
                await store.engine.dispose()
    with scratch("eventlog-postgres") as directory, postgres(directory) as server:
        for concurrent in (1, 100):
            url = server.create_database(f"eventlog{concurrent}")
            store = await real_store(directory, url)
            label = f"EventLog + real Store (PostgreSQL), {concurrent} at a time"
            in_process[label] = await appends_per_s(store, m, concurrent=concurrent)
            store.close()
            await store.engine.dispose()
    for concurrent in (1, 100):
        in_process[
            f"EventLog + store stub (keeps nothing), {concurrent} at a time"
        ] = await appends_per_s(cast(Store, NullStore()), m, concurrent=concurrent)
    rows += [
        {"what": label, "events/s": rate, "x floor": "-"} for label, rate in in_process.items()
    ]
    section.tables.append(Table(title=f"{n} deltas end to end, {m} appends in process", rows=rows))
    if floor:
        tmpfs = ratio(results["gateway, SQLite on tmpfs"], floor)
        disk = ratio(results["gateway, SQLite on disk"], floor)
        section.targets += [
            Target(
                name="throughput without persistence (tmpfs)",
                goal=">= 0.5x floor",
                value=f"{tmpfs}x",
                met=tmpfs >= 0.5,
            ),
            Target(
                name="throughput with persistence (disk)",
                goal=">= 0.5x floor",
                value=f"{disk}x",
                met=disk >= 0.5,
            ),
        ]
        section.notes.append(
            "PostgreSQL: "
            f"{ratio(results['gateway, PostgreSQL (durable, loopback)'], floor)}x floor "
            "(no target yet; it runs beside the gateway on this machine, so it shares its cores)"
        )
    else:
        section.notes.append("Run with the throughput benchmark to compare with the floor.")
    return section

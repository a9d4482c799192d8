"""``doctor``'s checks of the gateway itself: limits, snapshots, tracing and storage."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from sqlalchemy.engine import make_url

from app.doctor.checks import Check, Status, reachable
from app.process.bounds import Enforcement, EnforcementUnavailable
from app.process.snapshots import git_problem
from app.settings import Settings
from app.store.db import create_engine
from app.store.schema import SchemaError, check_schema
from app.telemetry_settings import TelemetryRefused, export_of, shown

STORAGE_TIMEOUT_S = 5.0
"""The longest the storage check waits for a database server."""


def limits_check(settings: Settings) -> Check:
    """How ``limits.max_process_rss_bytes`` and ``limits.max_process_count`` will be enforced."""
    try:
        by = Enforcement.choose(settings.limits.enforcement)
    except EnforcementUnavailable as exc:
        return Check(provider="gateway", name="limits", status="FAIL", detail=str(exc))
    return Check(
        provider="gateway",
        name="limits",
        status="ok" if by.memory == by.processes == "cgroup" else "warn",
        detail=f"memory by {by.memory}, processes by {by.processes} ({by.detail})",
    )


async def snapshots_check(settings: Settings) -> Check:
    """Whether the workspace snapshots can be taken: Git 2.32 or later, where they are on."""
    section = settings.snapshots
    if not section.enabled:
        return Check(
            provider="gateway",
            name="snapshots",
            status="warn",
            detail="off (snapshots.enabled = false): no changes per turn, no revert",
        )
    problem = await git_problem(section.git)
    if problem is not None:
        detail = f"{problem}: install Git 2.32 or later (Debian: apt-get install git), or set "
        return Check(
            provider="gateway",
            name="snapshots",
            status="FAIL",
            detail=detail + "snapshots.enabled = false",
        )
    found = shutil.which(section.git) or section.git
    return Check(
        provider="gateway",
        name="snapshots",
        status="ok",
        detail=f"{found}; records in {settings.snapshots_dir} (at most "
        f"{section.max_files} files, {section.max_bytes} bytes a workspace)",
    )


async def telemetry_check(settings: Settings, environ: Mapping[str, str]) -> Check:
    """Where traces go (``[telemetry]`` and the ``OTEL_*`` variables), and whether the
    collector takes connections; an export the gateway cannot make fails the start."""
    try:
        export = export_of(settings.telemetry, environ)
    except TelemetryRefused as exc:
        return Check(provider="gateway", name="tracing", status="FAIL", detail=str(exc))
    if export is None:
        return Check(
            provider="gateway", name="tracing", status="ok", detail="off (no collector named)"
        )
    detail = f"spans to {shown(export.endpoint)} as {export.service_name}"
    unreachable = await reachable(export.endpoint)
    if unreachable is not None:
        return Check(
            provider="gateway",
            name="tracing",
            status="warn",
            detail=f"{detail}; {unreachable} (spans are dropped until it answers)",
        )
    return Check(provider="gateway", name="tracing", status="ok", detail=detail)


async def storage_check(settings: Settings) -> Check:
    """Whether the gateway can keep its state: its data directory writable, its database
    answering at this version's schema. Creates nothing: a database not made yet is one
    ``serve`` (or ``migrate``) makes."""
    data_dir = settings.storage.data_dir
    url = settings.storage.database_url
    before = _files_check(data_dir, url)
    if before is not None:
        return before
    shown_url = make_url(url).render_as_string(hide_password=True)
    engine = create_engine(url, timeout_s=STORAGE_TIMEOUT_S)
    try:
        await check_schema(engine)
    except SchemaError as exc:
        return _storage("FAIL" if exc.newer else "warn", str(exc))
    except Exception as exc:  # any failure to reach the database is the answer
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return _storage(
            "FAIL",
            f"database at {shown_url} does not answer ({type(exc).__name__}: {first[:200]}); "
            "start it or fix storage.url",
        )
    finally:
        await engine.dispose()
    return _storage("ok", f"database at {shown_url} at this version's schema; data in {data_dir}")


def _files_check(data_dir: Path, url: str) -> Check | None:
    """The answer when the data directory cannot be written or the SQLite file is not made
    yet (nothing to open); None when the database is to be asked."""
    unwritable = _unwritable(data_dir)
    if unwritable is not None:
        return _storage(
            "FAIL",
            f"data directory {data_dir}: {unwritable}; make it writable by the gateway's user "
            "or set storage.data_dir",
        )
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    database = Path(parsed.database)
    if database.exists():
        return None
    unwritable = None if database.parent == data_dir else _unwritable(database.parent)
    if unwritable is not None:
        return _storage("FAIL", f"database directory {database.parent}: {unwritable}")
    return _storage("ok", f"no database yet at {database}: `agent-gateway serve` creates it")


def _storage(status: Status, detail: str) -> Check:
    return Check(provider="gateway", name="storage", status=status, detail=detail)


def _unwritable(directory: Path) -> str | None:
    """Why the gateway's user cannot create files in ``directory`` (or create it), or None."""
    existing = directory
    while not existing.exists():
        if existing.parent == existing:
            return "no part of the path exists"
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "it" if existing == directory else f"{existing}, where it would be created,"
        return f"{what} is not writable by the gateway's user"
    return None

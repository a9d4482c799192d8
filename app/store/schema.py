"""The database schema: Alembic's revisions, the check the app makes before it serves, and the
migration ``serve`` and ``migrate`` run, one process at a time.

    new database ──► migrate: create at head
    older        ──► migrate: upgrade to head
    at head      ──► nothing to do
    newer        ──► SchemaError naming both revisions (never downgraded, never touched)

Nothing here reads the working directory: the Alembic scripts are found next to the ``app``
package.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext, MigrationInfo
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

import app
from app.settings import ConfigError
from app.store.db import create_engine, create_migration_engine
from app.store.files import private_directory

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(app.__file__).resolve().parent.parent / "migrations"
MIGRATION_LOCK_TIMEOUT_S = 600.0
"""How long a process waits for another one's migration before it gives up."""
_LOCK_POLL_S = 0.05


class SchemaError(Exception):
    """The database's schema revision is not the one this code was written for.

    ``current`` is what the database records (empty: no schema at all), ``required`` is the head
    of ``migrations/``; ``newer`` when the database names a revision this code does not know
    (a newer gateway migrated it). The message says what to do.
    """

    def __init__(
        self,
        message: str,
        *,
        url: str,
        current: tuple[str, ...],
        required: str,
        newer: bool = False,
    ) -> None:
        super().__init__(message)
        self.url = url
        self.current = current
        self.required = required
        self.newer = newer


@dataclass(frozen=True, kw_only=True)
class Migration:
    """What ``migrate`` did: ``before`` is the revision found (empty: a new database)."""

    before: tuple[str, ...]
    after: str

    @property
    def changed(self) -> bool:
        return self.before != (self.after,)

    def describe(self, url: str) -> str:
        """What was done to the database at ``url``, in one line (no password shown)."""
        shown = make_url(url).render_as_string(hide_password=True)
        if not self.changed:
            return f"database at {shown} is up to date (schema revision {self.after})"
        if not self.before:
            return f"database at {shown} created at schema revision {self.after}"
        before = ", ".join(self.before)
        return f"database at {shown} upgraded from schema revision {before} to {self.after}"


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
    problem = _judge(engine.url.render_as_string(), await _revisions(engine), script)
    if problem is not None:
        raise problem


async def migrate(
    url: str,
    *,
    migrations_dir: Path = MIGRATIONS_DIR,
    lock_timeout_s: float = MIGRATION_LOCK_TIMEOUT_S,
) -> Migration:
    """Bring the database at ``url`` to this code's head: create a new one, upgrade an older one.

    Runs under the migration lock, so of several processes starting on one new database one
    migrates and the others find it done. A database migrated by a newer gateway is refused
    (``SchemaError`` naming both revisions) and left as it is.
    """
    script = ScriptDirectory(str(migrations_dir))
    async with migration_lock(url, timeout_s=lock_timeout_s):
        engine = create_engine(url)
        try:
            current = await _revisions(engine)
        finally:
            await engine.dispose()
        problem = _judge(url, current, script)
        if problem is not None and problem.newer:
            raise problem
        if problem is not None:
            # Each revision applied to a database in use is said; a new one's are not (the
            # caller says it was created).
            level = logging.INFO if current else logging.DEBUG
            await upgrade_async(url, migrations_dir=migrations_dir, level=level)
        return Migration(before=current, after=_head(script))


@contextlib.asynccontextmanager
async def migration_lock(url: str, *, timeout_s: float) -> AsyncIterator[None]:
    """Held by the one process migrating the database at ``url``; others wait for it.

    For a SQLite file, an exclusive ``flock`` on ``<file>-migrate.lock`` beside it (mode 600),
    which the kernel releases when its holder exits, however it exits; never a lock on the
    database file itself, whose SQLite locks closing another descriptor would drop. For
    PostgreSQL, a session advisory lock (``MIGRATION_LOCK_KEY``) on a connection of its own,
    which the server releases when that connection ends, however it ends. Waits at most
    ``timeout_s`` (then ``SchemaError``), saying once in the log that it waits.
    """
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() == "postgresql":
        async with _advisory_lock(url, timeout_s=timeout_s):
            yield
        return
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        yield  # one process per in-memory database
        return
    path = Path(f"{database}-migrate.lock")
    fd = _lock_file(path)

    async def try_flock() -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    try:
        await _take(try_flock, url=url, holder=str(path), timeout_s=timeout_s)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


MIGRATION_LOCK_KEY = 0x6167_7761_7931
"""The advisory lock key the gateway's migrations hold on PostgreSQL ("agway1")."""


@contextlib.asynccontextmanager
async def _advisory_lock(url: str, *, timeout_s: float) -> AsyncIterator[None]:
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:

            async def try_advisory_lock() -> bool:
                return await _try_advisory_lock(connection, MIGRATION_LOCK_KEY)

            holder = f"advisory lock {MIGRATION_LOCK_KEY}"
            await _take(try_advisory_lock, url=url, holder=holder, timeout_s=timeout_s)
            try:
                yield
            finally:
                await connection.execute(
                    text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY}
                )
                await connection.commit()
    finally:
        await engine.dispose()


async def _try_advisory_lock(connection: AsyncConnection, key: int) -> bool:
    """Take the session advisory lock ``key`` if free; no transaction stays open after."""
    taken = await connection.scalar(text("SELECT pg_try_advisory_lock(:key)"), {"key": key})
    await connection.commit()
    return bool(taken)


async def _take(
    try_lock: Callable[[], Awaitable[bool]], *, url: str, holder: str, timeout_s: float
) -> None:
    """Call ``try_lock`` until it takes the lock; ``SchemaError`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    waiting = False
    while not await try_lock():
        if time.monotonic() >= deadline:
            shown = make_url(url).render_as_string(hide_password=True)
            raise SchemaError(
                f"another process has been migrating {shown} for over {timeout_s:.0f} s "
                f"(it holds {holder}); wait for it to finish, or stop it",
                url=shown,
                current=(),
                required="",
            )
        if not waiting:
            waiting = True
            log.info(
                "waiting for another process to finish migrating the database",
                extra={"event": "database.migration_waiting"},
            )
        await asyncio.sleep(_LOCK_POLL_S)


class AlreadyServed(ConfigError):
    """Another gateway serves this database (and it is not a cluster): one line says which
    process, when known, and what to do."""


SERVE_LOCK_KEY = 0x6167_7761_7932
"""The advisory lock a gateway without ``[cluster]`` holds on its PostgreSQL database."""


def hold_sole_server(url: str, *, clustered: bool = False) -> int | None:
    """Make this process the only gateway serving the database at ``url``, for as long as it
    lives, unless it is one replica of a cluster (``clustered``); raises ``AlreadyServed``
    saying what to do when another gateway serves it.

    A SQLite file: an exclusive ``flock`` on ``<file>-serve.lock``, which the kernel releases
    when the process exits, however it exits, and which holds the holder's process id; returns
    the descriptor to keep. PostgreSQL: a
    session advisory lock (``SERVE_LOCK_KEY``) on a connection of its own, kept open by a
    daemon thread until the process exits (the server releases it then); returns None.
    """
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() == "postgresql":
        if not clustered:
            _hold_advisory_lock(url)
        return None
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    path = Path(f"{database}-serve.lock")
    fd = _lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        os.close(fd)
        who = f"process {holder}" if holder.isdigit() else "it"
        raise AlreadyServed(
            f"another gateway already serves {database} ({who} holds {path}): a SQLite "
            "file is one gateway's. Stop that one, give this one its own storage.data_dir, or "
            "run several replicas on PostgreSQL with [cluster] redis_url"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _lock_file(path: Path) -> int:
    """An open descriptor of the lock file ``path`` beside a SQLite file (mode 600; its
    directory made private when it is made here), to ``flock``."""
    if not path.parent.exists():
        private_directory(path.parent)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _hold_advisory_lock(url: str) -> None:
    taken: list[bool] = []
    decided = threading.Event()

    async def hold() -> None:
        engine = create_engine(url)
        try:
            async with engine.connect() as connection:
                taken.append(await _try_advisory_lock(connection, SERVE_LOCK_KEY))
                decided.set()
                if taken[0]:
                    await asyncio.Event().wait()  # until the process exits
        except Exception as exc:  # unreachable now: the migration that follows says so
            log.warning("could not check that no other gateway serves the database: %s", exc)
        finally:
            decided.set()
            await engine.dispose()

    threading.Thread(target=asyncio.run, args=(hold(),), name="sole-server", daemon=True).start()
    decided.wait(timeout=60)
    if taken == [False]:
        shown = make_url(url).render_as_string(hide_password=True)
        raise AlreadyServed(
            f"another gateway already serves {shown}: several gateways on one PostgreSQL "
            "database are replicas and need [cluster] redis_url (docs/operations/replicas.md). "
            "Stop that one, or configure the cluster on both"
        )


def upgrade(url: str, *, migrations_dir: Path = MIGRATIONS_DIR) -> None:
    """Migrate the database at ``url`` to head; for callers with no running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(upgrade_async(url, migrations_dir=migrations_dir))
    else:
        raise RuntimeError("upgrade() inside a running event loop: await upgrade_async()")


async def upgrade_async(
    url: str, *, migrations_dir: Path = MIGRATIONS_DIR, level: int = logging.INFO
) -> None:
    """Migrate the database at ``url`` to head without the lock (for a database no other
    process uses); safe to await inside a running event loop.

    Alembic's (synchronous) env runs in ``run_sync`` on a connection of a migration engine,
    handed over through ``config.attributes["connection"]``. Each revision commits on its own:
    one that fails is rolled back and leaves the database at the revision before it. Each
    revision applied is logged at ``level``, in one line.
    """
    config = alembic_config(url, migrations_dir=migrations_dir)
    config.attributes["on_version_apply"] = functools.partial(_applied, level=level)
    engine = create_migration_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_upgrade_to_head, config)
    finally:
        await engine.dispose()


def _judge(url: str, current: tuple[str, ...], script: ScriptDirectory) -> SchemaError | None:
    """None when ``current`` is the head of ``script``, else the error that says what to do."""
    required = _head(script)
    if current == (required,):
        return None
    shown = make_url(url).render_as_string(hide_password=True)
    known = {revision.revision for revision in script.walk_revisions()}
    unknown = [revision for revision in current if revision not in known]
    if unknown:
        return SchemaError(
            f"database at {shown} is at revision {', '.join(unknown)}, which this gateway "
            f"(schema revision {required}) does not know: a newer gateway migrated it. Run that "
            "gateway version or newer, or restore a backup taken before the upgrade",
            url=shown,
            current=current,
            required=required,
            newer=True,
        )
    if not current:
        message = (
            f"database at {shown} has no schema: `agent-gateway serve` creates it, or run "
            "`agent-gateway migrate`"
        )
    else:
        message = (
            f"database at {shown} is at revision {', '.join(current)} but this gateway needs "
            f"{required}: `agent-gateway serve` upgrades it, or run `agent-gateway migrate`"
        )
    return SchemaError(message, url=shown, current=current, required=required)


def schema_head(migrations_dir: Path = MIGRATIONS_DIR) -> str:
    """The schema revision this gateway needs (the head of ``migrations_dir``)."""
    return _head(ScriptDirectory(str(migrations_dir)))


def _head(script: ScriptDirectory) -> str:
    required = script.get_current_head()
    if required is None:
        raise RuntimeError(f"no migrations found in {script.dir}: the install is incomplete")
    return required


async def _revisions(engine: AsyncEngine) -> tuple[str, ...]:
    async with engine.connect() as connection:
        return await connection.run_sync(_current_heads)


def _upgrade_to_head(connection: Connection, config: Config) -> None:
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


def _applied(*, step: MigrationInfo, level: int, **_: object) -> None:
    """Say the revision a migration step just applied, with the first line of its summary."""
    if step.is_stamp:
        return
    revision = step.up_revision if step.is_upgrade else None
    doc = " ".join(str(getattr(revision, "doc", "") or "").split())
    target = ", ".join(step.destination_revision_ids) or "base"
    verb = "upgraded" if step.is_upgrade else "downgraded"
    log.log(
        level,
        "database schema %s to revision %s%s",
        verb,
        target,
        f": {doc}" if doc else "",
        extra={"event": "database.revision_applied", "revision": target},
    )


def _current_heads(connection: Connection) -> tuple[str, ...]:
    return MigrationContext.configure(connection).get_current_heads()

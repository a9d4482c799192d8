"""The process runner: the only code in the gateway that spawns processes.

``ProcessRunner.spawn`` starts a ``ProcessSpec`` (app/process/childspec.py) as a
``ManagedProcess`` (app/process/managed.py) and owns it until it is stopped; the ledger it keeps
lets a later gateway sweep what a killed one left behind (app/process/orphans.py).
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

from app.observability.metrics import GatewayMetrics
from app.process.bounds import WATCHDOG_ONLY, ChildBounds, Enforcement
from app.process.childspec import (
    ProcessLimits,
    ProcessSpec,
)
from app.process.managed import (
    ManagedProcess,
    ProcessError,
    SpawnError,
    SpawnFailure,
    signal_name,
)
from app.process.orphans import TAG_ENV, ProcessLedger
from app.process.parentdeath import LimitSetupError
from app.process.pipes import ChildPipes
from app.process.sandbox import wrap
from app.process.spawning import start_child
from app.process.workspaces import WorkspaceMoved, open_confined

logger = logging.getLogger(__name__)

# A confined child changes into the directory the runner opened, by its descriptor: in the
# forked child (before exec closes it) this names that very directory, whatever its path
# leads to by then.
_FD_DIR = Path("/proc/self/fd")
_ABSENT = object()


class ProcessRunner:
    """Spawns children and owns every one of them until it is stopped.

    ``limits`` apply to every child, enforced by ``enforcement`` (app/process/bounds.py; the
    watchdog alone by default); ``ledger`` (when given) is kept up to date with the children
    and their recorded descendants, so a later instance can sweep them.
    """

    def __init__(
        self,
        *,
        limits: ProcessLimits | None = None,
        ledger: ProcessLedger | None = None,
        metrics: GatewayMetrics | None = None,
        enforcement: Enforcement = WATCHDOG_ONLY,
    ) -> None:
        self.limits = limits or ProcessLimits()
        self.enforcement = enforcement
        self.ledger = ledger
        self.metrics = metrics
        self._children: dict[ManagedProcess, None] = {}  # a set that keeps spawn order
        self._closed = False
        self._spawning = 0
        # The fork and exec of a spawn run synchronously on the event loop (about 1 to 2.5 ms each).
        # Spawns take turns, so the loop serves other work between two of them instead of
        # stalling for the whole burst when many sessions start at once.
        self._one_spawn_at_a_time = asyncio.Lock()
        self._tag_prefix = ledger.tag_prefix if ledger else f"{os.getpid()}."
        self.spawn_count = 0
        """Children successfully spawned since this runner was built."""

    @property
    def spawning(self) -> bool:
        """A spawn is in flight: a child may exist whose pid the runner does not know yet."""
        return self._spawning > 0

    def owned_pids(self) -> set[int]:
        """Pids of children whose exit the event loop has not collected yet."""
        return {child.pid for child in self._children if child.returncode is None}

    def sync_ledger(self) -> None:
        """Write the children and their recorded descendants to the ledger, if any."""
        if self.ledger is None:
            return
        entries: dict[int, int] = {}
        for child in self._children:
            if child.start_ticks is not None:
                entries[child.pid] = child.start_ticks
            entries.update(child.descendants)
        self.ledger.write(entries)

    @property
    def live(self) -> tuple[ManagedProcess, ...]:
        """Children spawned and not yet stopped (an exited child is live until stopped)."""
        return tuple(self._children)

    async def spawn(self, spec: ProcessSpec) -> ManagedProcess:
        """Start ``spec.argv`` in a new session; raise ``SpawnError`` if it cannot start."""
        if self._closed:
            raise ProcessError("the process runner is closed")
        argv0 = spec.argv[0]
        cwd_fd = _open_cwd(spec)
        argv = spec.argv
        if spec.sandbox is not None:
            try:
                _check_executable(spec)
            except SpawnError:
                if cwd_fd is not None:
                    os.close(cwd_fd)
                raise
            argv = wrap(spec.sandbox, spec.argv)
        cwd = spec.cwd if cwd_fd is None else _FD_DIR / str(cwd_fd)
        pipes = ChildPipes(stderr_tail_bytes=spec.stderr_tail_bytes)
        tag = f"{self._tag_prefix}{self.spawn_count + self._spawning + 1}"
        self._spawning += 1
        bounds: ChildBounds | None = None
        try:
            bounds = await asyncio.to_thread(self.enforcement.for_child, tag, self.limits)
            # Returns once the child has exec'd (or failed to), so it has left cwd_fd behind.
            async with self._one_spawn_at_a_time:
                transport = await start_child(
                    lambda: pipes,
                    argv,
                    cwd=cwd,
                    env={**spec.env, TAG_ENV: tag},
                    bounds=bounds.shim,
                )
        except asyncio.CancelledError:
            if bounds is not None:  # not awaited: the caller is leaving now
                asyncio.get_running_loop().run_in_executor(None, bounds.release)
            raise
        except OSError as exc:
            if bounds is not None:
                await asyncio.to_thread(bounds.release)
            raise _start_error(exc, spec, argv[0], cwd, bounded=bounds is not None) from exc
        finally:
            self._spawning -= 1
            if cwd_fd is not None:
                os.close(cwd_fd)
        process = ManagedProcess(
            spec=spec,
            transport=transport,
            pipes=pipes,
            on_stopped=self._forget,
            tag=tag,
            max_line_bytes=spec.max_line_bytes or self.limits.max_line_bytes,
            bounds=bounds,
        )
        self.spawn_count += 1
        if self.metrics is not None:
            self.metrics.process_starts.labels(provider=spec.label).inc()
        logger.info(
            "process started: %s pid=%d cwd=%s",
            Path(argv0).name,
            process.pid,
            spec.cwd,
            extra={
                "event": "process.started",
                "pid": process.pid,
                "cli": Path(argv0).name,
                "provider": spec.label,
            },
        )
        if self._closed:  # aclose() ran while this spawn was in flight
            await process.stop(grace_s=0, term_s=0)
            raise ProcessError("the process runner is closed")
        self._children[process] = None
        self.sync_ledger()
        return process

    def _forget(self, process: ManagedProcess) -> None:
        if self._children.pop(process, _ABSENT) is not _ABSENT:
            self._exited(process)
        self.sync_ledger()

    def _exited(self, process: ManagedProcess) -> None:
        returncode = process.returncode
        if process.exceeded is not None:
            outcome = "limit"
        elif returncode is None or returncode < 0:
            outcome = "signalled"
        else:
            outcome = "exited" if returncode == 0 else "failed"
        if self.metrics is not None:
            self.metrics.process_exits.labels(provider=process.label, outcome=outcome).inc()
            if process.peak_rss_bytes is not None:
                self.metrics.process_peak_rss.labels(provider=process.label).observe(
                    process.peak_rss_bytes
                )
        fields: dict[str, object] = {
            **process.log_ids,
            "event": "process.exited",
            "pid": process.pid,
            "cli": Path(process.argv[0]).name,
            "provider": process.label,
            "outcome": outcome,
            "lifetime_s": round((datetime.now(UTC) - process.started_at).total_seconds(), 3),
            "peak_rss_bytes": process.peak_rss_bytes,
        }
        if returncode is not None and returncode < 0:
            fields["signal"] = signal_name(-returncode)
        else:
            fields["exit_code"] = returncode
        logger.info(
            "process exited: %s pid=%d %s",
            fields["cli"],
            process.pid,
            f"signal {fields['signal']}" if "signal" in fields else f"exit code {returncode}",
            extra=fields,
        )

    async def aclose(self, *, grace_s: float = 2.0) -> None:
        """Refuse further spawns and stop every live child concurrently, in bounded time."""
        self._closed = True
        results = await asyncio.gather(
            *(child.stop(grace_s=grace_s, term_s=grace_s) for child in self.live),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException):
                logger.error("could not stop a child: %s", result)
        if self.ledger is not None and not self._children:
            self.ledger.discard()


def _open_cwd(spec: ProcessSpec) -> int | None:
    """Check ``spec.cwd``; for a confined spec, the descriptor the child is to start in.

    None when the child is to start in ``spec.cwd`` by path: the spec is not confined, or
    ``/proc`` is missing (then the path was checked, but a swap right after is not covered).
    """
    argv0 = spec.argv[0]
    if spec.confine_to is None:
        if not spec.cwd.is_dir():
            raise SpawnError(kind="bad_cwd", argv0=argv0, detail=f"not a directory: {spec.cwd}")
        return None
    try:
        fd = open_confined(spec.cwd, spec.confine_to)
    except WorkspaceMoved as exc:
        kind: SpawnFailure = "bad_cwd" if exc.missing else "cwd_rejected"
        raise SpawnError(kind=kind, argv0=argv0, detail=exc.detail) from None
    if not _FD_DIR.is_dir():
        os.close(fd)
        return None
    if fd < 3:  # the child's stdio is set up first and would replace it
        low, fd = fd, fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
        os.close(low)
    return fd


def _check_executable(spec: ProcessSpec) -> None:
    """A sandboxed CLI that is not there fails as it would unsandboxed (``bwrap`` would start,
    then only say so on stderr)."""
    argv0 = spec.argv[0]
    path = spec.env.get("PATH", os.defpath)
    if shutil.which(argv0, path=path) is not None:
        return
    if shutil.which(argv0, mode=os.F_OK, path=path) is not None:
        raise SpawnError(kind="permission_denied", argv0=argv0, detail=f"{argv0}: not executable")
    raise SpawnError(kind="cli_missing", argv0=argv0, detail=f"{argv0}: not found")


def _start_error(
    exc: OSError, spec: ProcessSpec, exe: str, cwd: Path, *, bounded: bool
) -> SpawnError:
    """Why the child did not start; ``exe`` was run (bwrap for a sandboxed spec), ``bounded``:
    its cgroup (if any) was made."""
    argv0 = spec.argv[0]
    if not bounded or isinstance(exc, LimitSetupError):
        detail = f"cannot apply its memory and process limits: {exc}"
        return SpawnError(kind="spawn_failed", argv0=argv0, detail=detail)
    if spec.sandbox is not None and exe == spec.sandbox.bwrap:
        # bwrap itself could not be run: the CLI is not what is missing.
        detail = f"cannot start the sandbox {spec.sandbox.bwrap}: {exc}"
        return SpawnError(kind="spawn_failed", argv0=argv0, detail=detail)
    return SpawnError(kind=_spawn_failure(exc, cwd), argv0=argv0, detail=str(exc))


def _spawn_failure(exc: OSError, cwd: Path) -> SpawnFailure:
    """Classify why the exec failed; a missing file is the executable unless cwd vanished."""
    if isinstance(exc, FileNotFoundError):
        return "cli_missing" if cwd.is_dir() else "bad_cwd"
    if isinstance(exc, PermissionError):
        return "permission_denied"
    return "spawn_failed"

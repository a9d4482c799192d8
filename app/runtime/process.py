"""The process runner: the only code in the gateway that spawns processes.

Every child runs without a shell, in its own session (so its pid is also its process-group id),
with a complete, allow-listed environment plus ``AGENT_GATEWAY_PROCESS`` (a tag its descendants
inherit, see app/runtime/orphans.py). Its stdout is framed into newline-terminated lines, its
stderr is kept only as a bounded tail for error reports (app/runtime/pipes.py), and ``stop()`` ends
it as stdin EOF → grace → SIGTERM to the group → SIGKILL to the group, then SIGKILLs the
descendants that left the group (``setsid``), found by parent pid, by the tag and by what the
watchdog recorded.

A child that breaks a limit (``ProcessLimits``: a line too long, too much output in one turn;
the watchdog adds memory and process count) is SIGKILLed with its group at once and carries
the reason in ``ManagedProcess.exceeded``. What to run and the limits themselves are values
in app/runtime/childspec.py, re-exported here.

Errors::

    ProcessError            stdin closed or the process gone; stop() could not reap the child
    ├── SpawnError          the child never started (``kind`` says why)
    └── LineTooLong         a stdout line exceeded ``ProcessSpec.max_line_bytes``
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, cast

from app.observability.logs import bound_ids
from app.observability.metrics import GatewayMetrics
from app.runtime import proctree
from app.runtime.childspec import (
    BASE_ALLOWED,
    LimitExceeded,
    LimitReason,
    ProcessLimits,
    ProcessSpec,
    child_environment,
)
from app.runtime.orphans import TAG_ENV, ProcessLedger, child_tree
from app.runtime.pipes import STDOUT_HIGH_WATER, ChildPipes
from app.runtime.spawning import start_child
from app.runtime.workspaces import WorkspaceMoved, open_confined

__all__ = [
    "BASE_ALLOWED",
    "LimitExceeded",
    "LimitReason",
    "LineTooLong",
    "ManagedProcess",
    "ProcessError",
    "ProcessLimits",
    "ProcessRunner",
    "ProcessSpec",
    "SpawnError",
    "SpawnFailure",
    "child_environment",
]

logger = logging.getLogger(__name__)

SpawnFailure = Literal[
    "cli_missing", "permission_denied", "bad_cwd", "cwd_rejected", "spawn_failed"
]

# After the child exits, how long wait()/stop() give its last stderr bytes to arrive; a
# grandchild holding the pipe open must not stall them.
_STDERR_SETTLE_S = 0.25
# SIGKILL cannot be caught, so this only covers a child stuck in uninterruptible sleep.
_KILL_WAIT_S = 5.0
# A confined child changes into the directory the runner opened, by its descriptor: in the
# forked child (before exec closes it) this names that very directory, whatever its path
# leads to by then.
_FD_DIR = Path("/proc/self/fd")
_ABSENT = object()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class ProcessError(Exception):
    """Root of the runner's errors."""


class SpawnError(ProcessError):
    """The child could not be started."""

    def __init__(self, *, kind: SpawnFailure, argv0: str, detail: str) -> None:
        super().__init__(f"{kind}: {argv0}: {detail}")
        self.kind: SpawnFailure = kind
        self.argv0 = argv0
        self.detail = detail


class LineTooLong(ProcessError):
    """A stdout line exceeded ``limit`` bytes; the stream cannot be re-framed after this."""

    def __init__(self, *, limit: int) -> None:
        super().__init__(f"stdout line longer than {limit} bytes")
        self.limit = limit


async def _set_within(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` for ``event``; return whether it is set."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True


class ManagedProcess:
    """One live child. Built by ``ProcessRunner.spawn``; every instance must be ``stop()``-ped.

    ``read_line`` has one caller at a time; ``stop`` may run concurrently with it.
    """

    def __init__(
        self,
        *,
        spec: ProcessSpec,
        transport: asyncio.SubprocessTransport,
        pipes: ChildPipes,
        on_stopped: Callable[[ManagedProcess], None],
        tag: str,
        max_line_bytes: int,
    ) -> None:
        self.pid = transport.get_pid()
        self.started_at = datetime.now(UTC)
        self.start_ticks = proctree.starttime(self.pid)
        """The child's ``/proc`` start time: with ``pid``, its identity (None if already gone)."""
        self.argv = spec.argv
        self.label = spec.label
        self.log_ids = bound_ids()
        """The session, turn and provider ids of the context that started it, for its exit line."""
        self.peak_rss_bytes: int | None = None
        """The largest tree RSS the watchdog sampled (None until its first sample)."""
        self.tag = tag
        """This child's ``AGENT_GATEWAY_PROCESS`` value, inherited by its descendants."""
        self.descendants: dict[int, int] = {}
        """``pid → starttime`` of every descendant seen so far (the watchdog records them)."""
        self.exceeded: LimitExceeded | None = None
        """The limit this child broke, if any; it was SIGKILLed with its group for it."""
        self._max_line_bytes = max_line_bytes
        self._output_budget: int | None = None
        self._transport = transport
        self._pipes = pipes
        self._on_stopped = on_stopped
        self._scan_from = 0  # stdout bytes before this offset are known to hold no b"\n"
        self._overflowed = False
        self._stdin_closed = False
        self._stop_lock = asyncio.Lock()
        self._stopped_with: int | None = None

    @property
    def returncode(self) -> int | None:
        """The exit status once the child has exited; ``-N`` if signal N killed it."""
        return self._transport.get_returncode()

    @property
    def stderr_tail(self) -> str:
        """The last ``stderr_tail_bytes`` of stderr, decoded leniently."""
        return self._pipes.stderr_tail.decode(errors="replace")

    @property
    def last_output_at(self) -> float:
        """``time.monotonic()`` when stdout or stderr bytes last arrived."""
        return self._pipes.last_output_at

    @property
    def stdout_bytes(self) -> int:
        """Stdout bytes received from the child so far."""
        return self._pipes.stdout_bytes

    def limit_output(self, max_bytes: int | None) -> None:
        """Allow ``max_bytes`` more stdout bytes from now on (None: no bound).

        Past it the child breaks ``output_limit`` (see ``exceed``).
        """
        pipes = self._pipes
        self._output_budget = max_bytes
        pipes.output_limit = None if max_bytes is None else pipes.stdout_bytes + max_bytes
        pipes.on_output_limit = self._output_exceeded

    def _output_exceeded(self) -> None:
        budget = self._output_budget
        if budget is not None:
            used = self._pipes.stdout_bytes - (self._pipes.output_limit or 0) + budget
            self.exceed(LimitExceeded(reason="output_limit", limit=budget, observed=used))

    def exceed(self, limit: LimitExceeded) -> None:
        """Record that the child broke ``limit`` and SIGKILL its group and known descendants.

        Only the first limit is kept; ``stop()`` still has to be called to reap the child and
        to find descendants not seen yet.
        """
        if self.exceeded is not None or self._stopped_with is not None:
            return
        self.exceeded = limit
        logger.warning(
            "pid %d broke %s: %d > %d; killing its process tree",
            self.pid,
            limit.reason,
            limit.observed,
            limit.limit,
        )
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        for pid, start in list(self.descendants.items()):
            proctree.signal_verified(pid, start)

    async def read_line(self) -> bytes | None:
        """Return the next stdout line without its ``\\n`` or ``\\r\\n``, or None at EOF.

        A final line without a terminator is still returned. Raises ``LineTooLong`` when a line
        exceeds ``max_line_bytes``, and on every later call.
        """
        pipes, limit = self._pipes, self._max_line_bytes
        while True:
            if self._overflowed:
                self.exceed(LimitExceeded(reason="line_too_long", limit=limit, observed=limit + 1))
                raise LineTooLong(limit=limit)
            buf = pipes.stdout
            # Search only bytes not searched before, so a long line costs linear time overall.
            end = buf.find(b"\n", self._scan_from)
            if end < 0 and pipes.stdout_eof and buf:
                end = len(buf)  # the unterminated last line
            if end >= 0:
                stop = end - 1 if end > 0 and buf[end - 1] == 0x0D else end
                line = bytes(buf[:stop])
                del buf[: end + 1]  # bytearray drops a prefix in O(1)
                self._scan_from = 0
                if len(line) > limit:
                    self._overflowed = True
                    self.exceed(
                        LimitExceeded(reason="line_too_long", limit=limit, observed=len(line))
                    )
                    raise LineTooLong(limit=limit)
                if len(buf) < STDOUT_HIGH_WATER:
                    pipes.pause_stdout(paused=False)
                return line
            if pipes.stdout_eof:
                return None
            if len(buf) > limit + 1:  # + 1: the line's "\r" may be buffered before its "\n"
                self._overflowed = True
                self.exceed(LimitExceeded(reason="line_too_long", limit=limit, observed=len(buf)))
                raise LineTooLong(limit=limit)
            self._scan_from = len(buf)
            pipes.stdout_ready.clear()
            pipes.pause_stdout(paused=False)
            await pipes.stdout_ready.wait()

    async def write_line(self, data: bytes) -> None:
        """Write ``data`` and ``\\n`` to stdin and wait for the pipe buffer to drain.

        Raises ``ProcessError`` once stdin is closed or the child has exited, and ``ValueError``
        if ``data`` contains a newline (it would split the message). The drain has no timeout of
        its own: a child that stops reading stdin is the caller's idle or turn timeout to catch.
        """
        if b"\n" in data:
            raise ValueError("a line written to a child must not contain a newline")
        pipe = self._stdin()
        pipe.write(data)
        pipe.write(b"\n")
        await self._pipes.writable.wait()
        if pipe.is_closing():
            await asyncio.sleep(0)  # let a failed write deliver its connection-lost callback
        self._stdin()

    def _stdin(self) -> asyncio.WriteTransport:
        pipe = cast("asyncio.WriteTransport | None", self._transport.get_pipe_transport(0))
        if (
            self._stdin_closed
            or self._pipes.stdin_lost
            or self._pipes.exited.is_set()
            or pipe is None
        ):
            raise ProcessError(f"stdin of pid {self.pid} is closed")
        return pipe

    async def close_stdin(self) -> None:
        """Send EOF on stdin once any pending bytes are written; idempotent."""
        self._stdin_closed = True
        pipe = self._transport.get_pipe_transport(0)
        if pipe is not None:
            pipe.close()

    async def wait(self) -> int:
        """Wait, without a bound, for the child to exit; return its ``returncode``."""
        await self._pipes.exited.wait()
        await _set_within(self._pipes.stderr_done, _STDERR_SETTLE_S)
        return self._returncode()

    async def stop(self, *, grace_s: float = 5.0, term_s: float = 3.0) -> int:
        """End the child and its whole tree, reap it, release its pipes; return its status.

        Closes stdin and waits ``grace_s`` for a clean exit, then SIGTERMs the group and waits
        ``term_s``, then SIGKILLs the group. The group is SIGKILLed even after a clean exit so
        that grandchildren in it die too, and so is every descendant outside the group (see
        ``_kill_escapees``). Idempotent; raises ``ProcessError`` only if the child survives
        SIGKILL for ``_KILL_WAIT_S``.
        """
        async with self._stop_lock:
            if self._stopped_with is not None:
                return self._stopped_with
            await self.close_stdin()
            exited = await _set_within(self._pipes.exited, grace_s)
            if not exited:
                await self.signal_group(signal.SIGTERM)
                exited = await _set_within(self._pipes.exited, term_s)
            await self.signal_group(signal.SIGKILL)
            await self._kill_escapees()
            if not exited and not await _set_within(self._pipes.exited, _KILL_WAIT_S):
                raise ProcessError(f"pid {self.pid} survived SIGKILL for {_KILL_WAIT_S}s")
            await _set_within(self._pipes.stderr_done, _STDERR_SETTLE_S)
            # Closing the transport frees the pipes even if a process outside the group still
            # holds them; read_line then returns what was already buffered, then None.
            self._transport.close()
            self._pipes.stdout_eof = True
            self._pipes.stdout_ready.set()
            self._stopped_with = self._returncode()
        self._on_stopped(self)
        return self._stopped_with

    async def _kill_escapees(self) -> None:
        """SIGKILL descendants that left the group: by parent pid, by tag, and as recorded."""
        try:
            found = await asyncio.to_thread(
                child_tree, self.pid, self.start_ticks, self.tag, dict(self.descendants)
            )
        except (OSError, RuntimeError) as exc:  # no /proc, or the executor is shut down
            logger.warning("cannot scan the process tree of pid %d: %s", self.pid, exc)
            found = dict(self.descendants)
        killed = [pid for pid, start in found.items() if proctree.signal_verified(pid, start)]
        if killed:
            logger.info(
                "killed %d processes left behind by pid %d: %s", len(killed), self.pid, killed
            )

    async def signal_group(self, sig: int) -> None:
        """Send ``sig`` to the child's process group, if any member remains."""
        if self._stopped_with is not None:
            return  # the group id may since have been reused
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, sig)

    def _returncode(self) -> int:
        returncode = self._transport.get_returncode()
        if returncode is None:
            raise ProcessError(f"pid {self.pid} has not exited")
        return returncode


class ProcessRunner:
    """Spawns children and owns every one of them until it is stopped.

    ``limits`` apply to every child; ``ledger`` (when given) is kept up to date with the
    children and their recorded descendants, so a later instance can sweep them.
    """

    def __init__(
        self,
        *,
        limits: ProcessLimits | None = None,
        ledger: ProcessLedger | None = None,
        metrics: GatewayMetrics | None = None,
    ) -> None:
        self.limits = limits or ProcessLimits()
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
        cwd = spec.cwd if cwd_fd is None else _FD_DIR / str(cwd_fd)
        pipes = ChildPipes(stderr_tail_bytes=spec.stderr_tail_bytes)
        tag = f"{self._tag_prefix}{self.spawn_count + self._spawning + 1}"
        self._spawning += 1
        try:
            # Returns once the child has exec'd (or failed to), so it has left cwd_fd behind.
            async with self._one_spawn_at_a_time:
                transport = await start_child(
                    lambda: pipes, spec.argv, cwd=cwd, env={**spec.env, TAG_ENV: tag}
                )
        except OSError as exc:
            kind = _spawn_failure(exc, cwd)
            raise SpawnError(kind=kind, argv0=argv0, detail=str(exc)) from exc
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
            fields["signal"] = _signal_name(-returncode)
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


def _spawn_failure(exc: OSError, cwd: Path) -> SpawnFailure:
    """Classify why the exec failed; a missing file is the executable unless cwd vanished."""
    if isinstance(exc, FileNotFoundError):
        return "cli_missing" if cwd.is_dir() else "bad_cwd"
    if isinstance(exc, PermissionError):
        return "permission_denied"
    return "spawn_failed"

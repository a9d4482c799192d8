"""One live child process: its output framed into lines, its limits, and its bounded stop.

Every child runs without a shell, in its own session (so its pid is also its process-group id),
with a complete, allow-listed environment plus ``AGENT_GATEWAY_PROCESS`` (a tag its descendants
inherit, see app/process/orphans.py). Its stdout is framed into newline-terminated lines, its
stderr is kept only as a bounded tail for error reports (app/process/pipes.py), and ``stop()``
ends it as stdin EOF → grace → SIGTERM to the group → SIGKILL to the group, then SIGKILLs the
descendants that left the group (``setsid``), found by parent pid, by the tag and by what the
watchdog recorded.

A child that breaks a limit (``ProcessLimits``: a line too long, too much output in one turn;
memory and process count, enforced as app/process/bounds.py says) is SIGKILLed with its group
at once and carries the reason in ``ManagedProcess.exceeded``; one the kernel stopped (an
out-of-memory kill in its cgroup, an allocation refused by its rlimit) is judged when it
exits. What to run and the limits themselves are values in app/process/childspec.py.

Errors::

    ProcessError            stdin closed or the process gone; stop() could not reap the child
    ├── SpawnError          the child never started (``kind`` says why)
    └── LineTooLong         a stdout line exceeded ``ProcessSpec.max_line_bytes``
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal, cast

from app.observability.logs import bound_ids
from app.process import proctree
from app.process.bounds import ChildBounds
from app.process.childspec import (
    LimitExceeded,
    ProcessSpec,
)
from app.process.orphans import child_tree
from app.process.pipes import STDOUT_HIGH_WATER, ChildPipes

logger = logging.getLogger(__name__)

SpawnFailure = Literal[
    "cli_missing", "permission_denied", "bad_cwd", "cwd_rejected", "spawn_failed"
]

# After the child exits, how long wait()/stop() give its last stderr bytes to arrive; a
# grandchild holding the pipe open must not stall them.
_STDERR_SETTLE_S = 0.25
# SIGKILL cannot be caught, so this only covers a child stuck in uninterruptible sleep.
_KILL_WAIT_S = 5.0


def signal_name(number: int) -> str:
    """``SIGTERM`` for 15; ``signal 99`` for a number with no name."""
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
        bounds: ChildBounds | None = None,
    ) -> None:
        self.pid = transport.get_pid()
        self.started_at = datetime.now(UTC)
        self.start_ticks = proctree.starttime(self.pid)
        """The child's ``/proc`` start time: with ``pid``, its identity (None if already gone)."""
        self.argv = spec.argv
        self.label = spec.label
        self.sandboxed = spec.sandbox is not None
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
        self.bounds = bounds or ChildBounds()
        """How its memory and process count are enforced (its cgroup, its rlimit)."""
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
        pipes.on_exit = self._judge_exit

    @property
    def returncode(self) -> int | None:
        """The exit status once the child has exited; ``-N`` if signal N killed it."""
        return self._exit_status()

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

    def _judge_exit(self) -> None:
        """On exit: whether the kernel stopped the child for a limit (see ``ChildBounds``)."""
        peak = self._transport.get_extra_info("peak_rss_bytes")
        if isinstance(peak, int) and (self.peak_rss_bytes is None or peak > self.peak_rss_bytes):
            self.peak_rss_bytes = peak
        returncode = self._exit_status()
        if self.exceeded is None and returncode is not None:
            breach = self.bounds.breach_at_exit(
                returncode, self.peak_rss_bytes, stopped=self._stop_lock.locked()
            )
            if breach is not None:
                self.exceed(breach)

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
        self.bounds.kill()
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
                if self.bounds.judged_at_exit and not pipes.exited.is_set():
                    # Its end may be a limit the kernel enforced: let the exit be judged
                    # before the reader asks ``exceeded``.
                    await _set_within(pipes.exited, _STDERR_SETTLE_S)
                return None
            if len(buf) > limit + 1:  # + 1: the line's "\r" may be buffered before its "\n"
                self._overflowed = True
                self.exceed(LimitExceeded(reason="line_too_long", limit=limit, observed=len(buf)))
                raise LineTooLong(limit=limit)
            self._scan_from = len(buf)
            pipes.stdout_ready.clear()
            pipes.pause_stdout(paused=False)
            await pipes.stdout_ready.wait()

    async def read_lines(self) -> list[bytes] | None:
        """Every complete stdout line buffered now (at least one, waiting for it), each as
        ``read_line`` returns it, or None at EOF: a reader of a CLI that prints quickly takes
        the lines of a pipe read at once instead of one call per line."""
        buf = self._pipes.stdout
        end = buf.rfind(b"\n")
        if end < 0 or end > self._max_line_bytes or self._overflowed:
            # Nothing complete yet, or a line that may be too long: one at a time, with
            # read_line's waiting and limits.
            line = await self.read_line()
            return None if line is None else [line]
        lines = bytes(buf[:end]).split(b"\n")
        del buf[: end + 1]
        self._scan_from = 0
        if len(buf) < STDOUT_HIGH_WATER:
            self._pipes.pause_stdout(paused=False)
        return [line[:-1] if line.endswith(b"\r") else line for line in lines]

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
            self.bounds.kill()
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
            await asyncio.to_thread(self.bounds.release)
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

    def _exit_status(self) -> int | None:
        """The child's exit status. A sandboxed CLI's comes through bwrap, which exits with
        128 + N when signal N killed the CLI: that is read back as ``-N``."""
        returncode = self._transport.get_returncode()
        if returncode is not None and self.sandboxed and 128 < returncode < 128 + signal.NSIG:
            return 128 - returncode
        return returncode

    def _returncode(self) -> int:
        returncode = self._exit_status()
        if returncode is None:
            raise ProcessError(f"pid {self.pid} has not exited")
        return returncode

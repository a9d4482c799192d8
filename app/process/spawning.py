"""Starting a child with ``vfork`` and watching it from the event loop.

uvloop's ``subprocess_exec`` starts a child with ``fork``, whose cost grows with the parent's
memory (the page tables are copied): measured on the benchmark machine, 3 ms with a 60 MB
parent, 6 ms with 100 MB more, 11 ms with 400 MB more, every millisecond of it with the event
loop stopped. ``subprocess.Popen`` uses ``vfork`` and ``exec`` (CPython's ``_posixsubprocess``),
which costs the same whatever the gateway holds. ``start_child`` starts the child that way and
gives the loop what ``subprocess_exec`` would: a ``SubprocessTransport`` whose pipes are the
loop's own pipe transports and whose exit is a pidfd the loop watches, calling the same
``SubprocessProtocol`` methods in the same order (``connection_made``, ``pipe_data_received``,
``pipe_connection_lost``, ``process_exited``, then ``connection_lost`` once the child has
exited and every pipe is closed).

Every child is forked from the one long-lived spawner thread and arms a parent-death signal
before it runs the CLI (app/process/parentdeath.py): it dies with the gateway, even one killed
with SIGKILL.

Without ``os.pidfd_open`` (not Linux 5.3+) the loop's own ``subprocess_exec`` is used, from the
loop's thread and without the parent-death signal (the start-up sweep still finds what a killed
gateway left).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

from app.process import parentdeath
from app.process.bounds import ShimBounds

PIDFD_USABLE = hasattr(os, "pidfd_open")


async def start_child(
    protocol_factory: Callable[[], asyncio.SubprocessProtocol],
    argv: Sequence[str],
    *,
    cwd: str | Path,
    env: Mapping[str, str],
    executor: Executor | None = None,
    bounds: ShimBounds | None = None,
) -> asyncio.SubprocessTransport:
    """Start ``argv`` in a new session with its three standard streams piped to the loop.

    Returns once the child has exec'd; raises ``OSError`` when it could not (the executable,
    the directory), as ``subprocess_exec`` does. The start runs on a worker thread, so the loop
    is not held while the child execs (uvloop's ``subprocess_exec`` holds it for the whole
    fork and exec); a caller cancelled meanwhile leaves no child behind. ``executor`` runs
    the start (default: the spawner thread, whose lifetime the children's parent-death
    signal is tied to; see app/process/parentdeath.py). ``bounds`` are applied by the child
    to itself before it execs (not by the loop's own ``subprocess_exec``, which has no shim).
    """
    loop = asyncio.get_running_loop()
    if not PIDFD_USABLE:
        transport, _ = await loop.subprocess_exec(
            protocol_factory,
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        return transport
    # vfork + exec in the spawner thread: the loop goes on serving while the child execs.
    started = loop.run_in_executor(
        executor or parentdeath.SPAWNER, _start, list(argv), cwd, env, bounds or ShimBounds()
    )
    try:
        child = await asyncio.shield(started)
    except asyncio.CancelledError:
        # The child may start all the same: nobody will own it, so it is killed and reaped.
        started.add_done_callback(_discard)
        raise
    transport = ChildTransport(loop, protocol_factory(), child)
    try:
        await transport.connect()
    except BaseException:
        transport.close()
        raise
    return transport


@dataclasses.dataclass(frozen=True)
class _Started:
    popen: subprocess.Popen[bytes]
    ends: tuple[int, int, int]
    """Our ends of the child's stdin, stdout and stderr pipes."""


def _start(
    argv: list[str], cwd: str | Path, env: Mapping[str, str], bounds: ShimBounds
) -> _Started:
    """Start the child on pipes made here (not by Popen: its file objects would close the
    descriptors a second time after the loop's transports did), through the parent-death
    shim when this interpreter can run it; return once the CLI itself has exec'd."""
    stdin, stdin_end = os.pipe()
    stdout_end, stdout = os.pipe()
    stderr_end, stderr = os.pipe()
    ours = (stdin_end, stdout_end, stderr_end)
    report_end, report = os.pipe() if parentdeath.INTERPRETER else (-1, -1)
    theirs = (stdin, stdout, stderr, report) if report >= 0 else (stdin, stdout, stderr)
    try:
        popen = subprocess.Popen(  # noqa: S603 - a ProcessSpec's argv, no shell
            parentdeath.shim_argv(
                argv, report, cgroup_procs=bounds.cgroup_procs, data_bytes=bounds.data_bytes
            )
            if report >= 0
            else argv,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=env,
            start_new_session=True,
            pass_fds=(report,) if report >= 0 else (),
        )
    except BaseException:
        for fd in ours:
            os.close(fd)
        if report_end >= 0:
            os.close(report_end)
        raise
    finally:
        for fd in theirs:  # the child's ends: it has its own copies now
            os.close(fd)
    failure = parentdeath.exec_error(report_end, argv[0]) if report_end >= 0 else None
    if failure is not None:
        popen.wait()  # the shim exits at once after reporting
        for fd in ours:
            os.close(fd)
        raise failure
    return _Started(popen=popen, ends=ours)


def _discard(started: asyncio.Future[_Started]) -> None:
    if started.cancelled() or started.exception() is not None:
        return
    child = started.result()
    child.popen.kill()
    for fd in child.ends:
        os.close(fd)
    # Reaped on a worker thread: a killed child exits at once, but not within this callback.
    asyncio.get_running_loop().run_in_executor(None, child.popen.wait)


class _PipeEnd:
    """One of our pipe ends, as the file object the loop's pipe transports take.

    Whoever closes the descriptor does it once: asyncio's transports close it through this
    object; uvloop hands the descriptor to libuv, which closes it, and then closes the file
    object too, expecting ``EBADF`` -- but by then another thread (SQLite's, a child's start)
    may have been given the same number, and a second ``close`` would close that. So under
    uvloop ``close`` leaves the descriptor alone.
    """

    def __init__(self, fd: int, *, loop_closes: bool) -> None:
        self._fd = fd
        self._loop_closes = loop_closes
        self.closed = False

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if not self._loop_closes:
            os.close(self._fd)


def _loop_closes_descriptors(loop: asyncio.AbstractEventLoop) -> bool:
    return type(loop).__module__.partition(".")[0] == "uvloop"


class ChildTransport(asyncio.SubprocessTransport):
    """A started ``Popen`` child, its pipes and its exit, as a ``SubprocessTransport``."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        protocol: asyncio.SubprocessProtocol,
        child: _Started,
    ) -> None:
        super().__init__()
        self._loop = loop
        self._protocol = protocol
        self._popen = popen = child.popen
        self._ends: dict[int, int] = dict(enumerate(child.ends))
        """Pipe ends not handed to the loop yet (by the child's fd: 0, 1, 2)."""
        self._pid = popen.pid
        self._returncode: int | None = None
        self.peak_rss_bytes: int | None = None
        """The largest resident memory of the child or of a descendant it reaped (``wait4``)."""
        self._pipes: dict[int, asyncio.BaseTransport] = {}
        self._open_pipes: set[int] = set()
        self._pending: list[tuple[Callable[..., object], tuple[Any, ...]]] | None = []
        self._closed = False
        self._finished = False
        self._pidfd: int | None = os.pidfd_open(popen.pid)
        loop.add_reader(self._pidfd, self._child_exited)

    async def connect(self) -> None:
        """Hand the pipes to the loop, then tell the protocol (what the pipes delivered
        meanwhile follows ``connection_made``)."""
        loop = self._loop
        loop_closes = _loop_closes_descriptors(loop)
        for fd in (0, 1, 2):
            # From here the loop's transport closes the descriptor (even one that fails to
            # connect): never this transport too.
            end = _PipeEnd(self._ends.pop(fd), loop_closes=loop_closes)
            self._open_pipes.add(fd)
            connect = loop.connect_write_pipe if fd == 0 else loop.connect_read_pipe
            self._pipes[fd], _ = await connect(functools.partial(_Pipe, self, fd), end)
        self._protocol.connection_made(self)
        pending, self._pending = self._pending, None
        for callback, args in pending or ():
            callback(*args)

    def _call(self, callback: Callable[..., object], *args: Any) -> None:
        if self._pending is not None:
            self._pending.append((callback, args))
        else:
            callback(*args)

    def _pipe_data(self, fd: int, data: bytes) -> None:
        self._call(self._protocol.pipe_data_received, fd, data)

    def _pipe_lost(self, fd: int, exc: Exception | None) -> None:
        self._open_pipes.discard(fd)
        self._call(self._protocol.pipe_connection_lost, fd, exc)
        self._call(self._try_finish)

    def _pause_stdin(self, *, paused: bool) -> None:
        # Flow control of the stdin pipe is the protocol's, as for the loop's transports.
        if paused:
            self._protocol.pause_writing()
        else:
            self._protocol.resume_writing()

    def _child_exited(self) -> None:
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        try:
            _, status, usage = os.wait4(self._pid, 0)  # the pidfd is readable: it has exited
            returncode = os.waitstatus_to_exitcode(status)
            self.peak_rss_bytes = usage.ru_maxrss * 1024  # kilobytes on Linux
        except ChildProcessError:
            returncode = 255  # reaped by someone else: its status is lost
        self._returncode = self._popen.returncode = returncode
        self._call(self._protocol.process_exited)
        self._call(self._try_finish)

    def _try_finish(self) -> None:
        if self._finished or self._returncode is None or self._open_pipes:
            return
        self._finished = True
        self._protocol.connection_lost(None)

    # --- asyncio.SubprocessTransport --------------------------------------------------------

    def get_pid(self) -> int:
        return self._pid

    def get_returncode(self) -> int | None:
        return self._returncode

    def get_pipe_transport(self, fd: int) -> asyncio.BaseTransport | None:
        return self._pipes.get(fd)

    def send_signal(self, signal: int) -> None:
        if self._returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def is_closing(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the pipes; a child still running is killed (as the loop's own transports
        do) and still reaped when it exits."""
        if self._closed:
            return
        self._closed = True
        for pipe in self._pipes.values():
            pipe.close()
        for fd in self._ends.values():  # never handed to the loop
            os.close(fd)
        self._ends.clear()
        self.kill()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"subprocess": self._popen, "peak_rss_bytes": self.peak_rss_bytes}.get(name, default)


class _Pipe(asyncio.Protocol):
    """One standard stream of the child, forwarded to the transport's protocol."""

    def __init__(self, owner: ChildTransport, fd: int) -> None:
        self._owner = owner
        self._fd = fd

    def data_received(self, data: bytes) -> None:
        self._owner._pipe_data(self._fd, data)

    def eof_received(self) -> bool:
        return False  # close the read end: the child closed its side

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner._pipe_lost(self._fd, exc)

    def pause_writing(self) -> None:
        self._owner._pause_stdin(paused=True)

    def resume_writing(self) -> None:
        self._owner._pause_stdin(paused=False)

"""The event-loop side of a child's pipes: stdout buffering with back-pressure, a bounded
stderr tail, the stdout budget of a turn, stdin flow control and the exit notice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import cast

logger = logging.getLogger(__name__)

# Past this many unread stdout bytes we stop reading the pipe, so a child that outpaces its
# reader blocks on write instead of growing our memory.
STDOUT_HIGH_WATER = 1024 * 1024


class ChildPipes(asyncio.SubprocessProtocol):
    """Receives the child's pipe traffic and exit from the event loop."""

    def __init__(self, *, stderr_tail_bytes: int) -> None:
        self.transport: asyncio.SubprocessTransport | None = None
        self.stdout = bytearray()
        self.stdout_eof = False
        self.stdout_ready = asyncio.Event()
        self.stderr_tail = bytearray()
        self.stderr_done = asyncio.Event()
        self.exited = asyncio.Event()
        self.stdin_lost = False
        self.writable = asyncio.Event()  # cleared while the stdin pipe buffer is over its limit
        self.writable.set()
        self.last_output_at = time.monotonic()
        self.stdout_bytes = 0
        self.output_limit: int | None = None  # a value of stdout_bytes not to exceed
        self.on_output_limit: Callable[[], None] | None = None
        self.on_exit: Callable[[], None] | None = None  # called once the child is reaped
        self._stderr_tail_bytes = stderr_tail_bytes
        self._stdout_paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not registered with asyncio's ABCs: no isinstance checks.
        self.transport = cast(asyncio.SubprocessTransport, transport)

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.last_output_at = time.monotonic()
        if fd == 1:
            self.stdout += data
            self.stdout_ready.set()
            self.stdout_bytes += len(data)
            limit = self.output_limit
            if limit is not None and self.stdout_bytes > limit and self.on_output_limit:
                self.on_output_limit()
            if len(self.stdout) >= STDOUT_HIGH_WATER:
                self.pause_stdout(paused=True)
        elif fd == 2:
            tail = self.stderr_tail
            tail += data
            if len(tail) > self._stderr_tail_bytes:
                del tail[: len(tail) - self._stderr_tail_bytes]

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 0:
            self.stdin_lost = True
            self.writable.set()  # wake a writer waiting to drain, so it sees the loss
        elif fd == 1:
            self.stdout_eof = True
            self.stdout_ready.set()
        elif fd == 2:
            self.stderr_done.set()

    def process_exited(self) -> None:
        if self.transport is not None:
            pid, returncode = self.transport.get_pid(), self.transport.get_returncode()
            logger.info("process exited pid=%d returncode=%s", pid, returncode)
        if self.on_exit is not None:
            self.on_exit()
        self.exited.set()
        self.writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        # Exited with every pipe closed: release the transport, as asyncio's own streams do.
        if self.transport is not None:
            self.transport.close()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def pause_stdout(self, *, paused: bool) -> None:
        pipe = cast(
            "asyncio.ReadTransport | None",
            self.transport.get_pipe_transport(1) if self.transport else None,
        )
        if pipe is not None and paused != self._stdout_paused:
            self._stdout_paused = paused
            pipe.pause_reading() if paused else pipe.resume_reading()

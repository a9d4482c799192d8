"""The editor's end of the relay: lines from stdin, lines to stdout, without blocking the
event loop.

Pipes (what an editor gives its agent) and terminals are read and written through the event
loop. Anything else (a regular file, ``/dev/null``, a pipe where the loop cannot watch one) is
read by a daemon thread that ends at the end of the input (a file has one at once; a pipe when
the editor closes it, or with the process) and written directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
import sys
import threading
from typing import BinaryIO

log = logging.getLogger(__name__)

MAX_LINE = 64 * 1024 * 1024
"""The longest line taken from the editor; a longer one is dropped (with a log line)."""
CHUNK = 64 * 1024


def _watchable(fileno: int) -> bool:
    """Whether the event loop can watch ``fileno``: a pipe, a socket or a terminal (not a
    file, nor a device such as ``/dev/null``, which epoll refuses)."""
    mode = os.fstat(fileno).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fileno))


class EditorGone(Exception):
    """The editor closed the relay's stdout."""


class _Drain(asyncio.Protocol):
    """Flow control for the stdout pipe: ``drain`` waits while the pipe is full."""

    def __init__(self) -> None:
        self._resumed: asyncio.Future[None] | None = None
        self.lost = False

    def pause_writing(self) -> None:
        self._resumed = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)
        self._resumed = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.resume_writing()

    async def drain(self) -> None:
        if self._resumed is not None:
            await self._resumed


class EditorPipe:
    """stdin and stdout as lines."""

    def __init__(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        self._stdin = stdin or sys.stdin.buffer
        self._stdout = stdout or sys.stdout.buffer
        self._reader: asyncio.StreamReader | None = None
        self._reading: asyncio.ReadTransport | None = None
        self._chunks: asyncio.Queue[bytes] | None = None
        self._writer: asyncio.WriteTransport | None = None
        self._drain = _Drain()
        self._buffer = bytearray()
        self._skipping = False
        self._eof = False
        self._blocking: dict[int, bool] = {}

    async def open(self) -> None:
        """Watch stdin and stdout in the loop where it can (through duplicates of their
        descriptors, so that closing them leaves ``sys.stdin`` and ``sys.stdout`` open)."""
        loop = asyncio.get_running_loop()
        for stream in (self._stdin, self._stdout):
            self._blocking[stream.fileno()] = os.get_blocking(stream.fileno())
        if _watchable(self._stdin.fileno()):
            reader = asyncio.StreamReader(limit=CHUNK)
            stdin = os.fdopen(os.dup(self._stdin.fileno()), "rb", buffering=0)
            self._reading, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), stdin
            )
            self._reader = reader
        if _watchable(self._stdout.fileno()):
            stdout = os.fdopen(os.dup(self._stdout.fileno()), "wb", buffering=0)
            transport, _ = await loop.connect_write_pipe(lambda: self._drain, stdout)
            # Every line waits until the pipe took it all: one message, one flush.
            transport.set_write_buffer_limits(high=0)
            self._writer = transport

    def _start_reader_thread(self) -> None:
        loop = asyncio.get_running_loop()
        chunks: asyncio.Queue[bytes] = asyncio.Queue()
        fileno = self._stdin.fileno()

        def read() -> None:
            chunk = b"-"
            while chunk:
                try:
                    chunk = os.read(fileno, CHUNK)
                except OSError:
                    chunk = b""
                try:
                    loop.call_soon_threadsafe(chunks.put_nowait, chunk)
                except RuntimeError:  # the loop is closed: the relay has ended
                    return

        self._chunks = chunks
        threading.Thread(target=read, name="agent-gateway-acp-stdin", daemon=True).start()

    async def _chunk(self) -> bytes:
        if self._reader is not None:
            return await self._reader.read(CHUNK)
        if self._chunks is None:
            self._start_reader_thread()
        assert self._chunks is not None
        return await self._chunks.get()

    async def read_line(self) -> str | None:
        """The editor's next line (without its line break), or None at the end of stdin."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                if self._skipping:
                    self._skipping = False
                    continue
                text = line.decode("utf-8", errors="replace").rstrip("\r")
                if text.strip():
                    return text
                continue
            if self._eof:
                rest = b"" if self._skipping else bytes(self._buffer)
                self._buffer.clear()
                text = rest.decode("utf-8", errors="replace").strip()
                return text or None
            if len(self._buffer) > MAX_LINE:
                log.warning("the editor sent a line over %d bytes; dropped", MAX_LINE)
                self._buffer.clear()
                self._skipping = True
            chunk = await self._chunk()
            if not chunk:
                self._eof = True
            self._buffer += chunk

    async def write_line(self, text: str) -> None:
        """One line to the editor, flushed (waits while the editor does not read)."""
        data = text.encode() + b"\n"
        if self._writer is None:
            try:
                self._stdout.write(data)
                self._stdout.flush()
            except (BrokenPipeError, ValueError) as exc:
                raise EditorGone from exc
            return
        if self._drain.lost or self._writer.is_closing():
            raise EditorGone
        self._writer.write(data)
        await self._drain.drain()
        if self._drain.lost:
            raise EditorGone

    def close(self) -> None:
        """Stop reading and writing; the descriptors are left blocking again, as found."""
        if self._reading is not None:
            self._reading.close()
        if self._writer is not None:
            self._writer.close()
        for fileno, blocking in self._blocking.items():
            with contextlib.suppress(OSError):
                os.set_blocking(fileno, blocking)

"""Stream clients that timestamp every stamped delta they receive.

``SseStream`` is a small HTTP/1.1 client on a raw asyncio socket (chunked transfer decoding
and SSE framing only): it costs the client as little CPU as possible, and it reads the
gateway and the floor relay (benchmarks/floor.py) in exactly the same way. ``WsStream``
reads the gateway's WebSocket the same way (upgrade, then frames parsed by hand).

A delta carries ``i=<index> t=<emit ns>``; the client records ``time.monotonic_ns()`` when the
read that completed it returned. Later copies of an index (the completed message repeats the
text) are ignored.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import struct
import time
from array import array

from benchmarks.harness import AUTH, percentile

STAMP = re.compile(rb"i=(\d+) t=(\d+)")
END = re.compile(rb"bench-end emitted=(\d+) elapsed_ns=(\d+)")
READ_SIZE = 1 << 16


async def request(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    port: int,
    path: str,
    headers: dict[str, str],
    *,
    expect: int,
) -> None:
    """Send a GET and read the response head; anything but ``expect`` is an error."""
    head = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
    status = await reader.readuntil(b"\r\n\r\n")
    if not status.startswith(b"HTTP/1.1 %d" % expect):
        raise RuntimeError(f"{path} refused: {status[:200]!r}")


class Stamps:
    """Emit and receive times of deltas 0..n-1 (0 = not seen)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.emitted = array("q", bytes(8 * count))
        self.received = array("q", bytes(8 * count))
        self.seen = 0
        self.delta_events = 0
        """``message.delta`` events the deltas came in (fewer than ``seen`` when joined)."""
        self.all_seen = asyncio.Event()
        self.end: tuple[int, int] | None = None
        """``(emitted, elapsed_ns)`` from the agent's closing message, once seen."""

    def take(self, payload: bytes, now: int) -> None:
        self.delta_events += payload.count(b'"type":"message.delta"')
        for match in STAMP.finditer(payload):
            i = int(match.group(1))
            if i < self.count and not self.received[i]:
                self.received[i] = now
                self.emitted[i] = int(match.group(2))
                self.seen += 1
        if self.end is None:
            for end in END.finditer(payload):
                if int(end.group(1)) == self.count:  # not a previous turn's closing message
                    self.end = (self.count, int(end.group(2)))
        if self.end is not None:  # the agent's closing message comes after every delta
            self.all_seen.set()

    def latencies_ns(self) -> list[int]:
        return [r - e for r, e in zip(self.received, self.emitted, strict=True) if r]

    def span_ns(self) -> int:
        """From the first delta's emission to the last delta's receipt."""
        received = [r for r in self.received if r]
        emitted = [e for e in self.emitted if e]
        return max(received) - min(emitted) if received else 0

    def summary(self) -> dict[str, float]:
        lat = self.latencies_ns()
        return {
            "received": self.seen,
            "p50_ms": round(percentile(lat, 50) / 1e6, 3),
            "p99_ms": round(percentile(lat, 99) / 1e6, 3),
            "max_ms": round(max(lat) / 1e6, 3) if lat else float("nan"),
        }


class SseStream:
    """One SSE subscription: ``await open()``, then ``run()`` feeds its ``Stamps``."""

    def __init__(
        self,
        port: int,
        path: str,
        stamps: Stamps,
        *,
        headers: dict[str, str] | None = None,
        read_size: int = READ_SIZE,
        bytes_per_s: float | None = None,
    ) -> None:
        self.port = port
        self.path = path
        self.stamps = stamps
        self.headers = headers or {}
        self.read_size = read_size
        self.bytes_per_s = bytes_per_s
        self.bytes = 0
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._body = bytearray()
        self._chunks = bytearray()

    async def open(self, *, rcvbuf: int | None = None) -> None:
        """Connect, send the request and read until the first body chunk (subscribed)."""
        if rcvbuf is not None:
            import socket  # noqa: PLC0415 - only the slow consumer needs a small buffer

            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.connect(("127.0.0.1", self.port))
            sock.setblocking(False)
            self._reader, self._writer = await asyncio.open_connection(sock=sock)
        else:
            self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self.port)
        headers = {"Accept": "text/event-stream", **self.headers}
        await request(self._reader, self._writer, self.port, self.path, headers, expect=200)
        while not self._body:
            await self._read()

    async def _read(self) -> bool:
        assert self._reader is not None
        data = await self._reader.read(self.read_size)
        if not data:
            return False
        self.bytes += len(data)
        self._chunks += data
        self._dechunk()
        return True

    def _dechunk(self) -> None:
        chunks = self._chunks
        while True:
            end = chunks.find(b"\r\n")
            if end < 0:
                return
            size = int(chunks[:end].split(b";", 1)[0], 16)
            if len(chunks) < end + 2 + size + 2:
                return
            self._body += chunks[end + 2 : end + 2 + size]
            del chunks[: end + 2 + size + 2]

    async def run(self) -> None:
        """Read until every delta (or the agent's closing message) arrived, or the stream ends."""
        stamps = self.stamps
        pace_start = time.monotonic()
        while not stamps.all_seen.is_set():
            if not await self._read():
                return
            now = time.monotonic_ns()
            body = self._body
            cut = body.rfind(b"\n\n")
            if cut >= 0:
                stamps.take(bytes(body[: cut + 2]), now)
                del body[: cut + 2]
            if self.bytes_per_s:
                ahead = self.bytes / self.bytes_per_s - (time.monotonic() - pace_start)
                if ahead > 0:
                    await asyncio.sleep(ahead)

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()


class WsStream:
    """One WebSocket subscription of the gateway, on a raw asyncio socket like ``SseStream``
    (an HTTP/1.1 upgrade, then unmasked server frames parsed in place), so the client costs
    as little as the SSE one; no compression is offered, as a browser may not either."""

    def __init__(self, port: int, session_id: str, after: int, stamps: Stamps) -> None:
        self.port = port
        self.path = f"/v1/sessions/{session_id}/ws?after={after}"
        self.stamps = stamps
        self.bytes = 0
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._frames = bytearray()

    async def open(self) -> None:
        self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self.port)
        key = base64.b64encode(os.urandom(16)).decode()
        headers = {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Key": key,
            "Sec-WebSocket-Version": "13",
            **AUTH,
        }
        await request(self._reader, self._writer, self.port, self.path, headers, expect=101)

    def _payloads(self) -> tuple[bytes, bool]:
        """The payloads of every complete frame buffered (joined), and whether one closed."""
        frames, out, closed = self._frames, bytearray(), False
        while len(frames) >= 2:
            opcode, size, at = frames[0] & 0x0F, frames[1] & 0x7F, 2
            if size == 126:
                if len(frames) < 4:
                    break
                size, at = struct.unpack_from("!H", frames, 2)[0], 4
            elif size == 127:
                if len(frames) < 10:
                    break
                size, at = struct.unpack_from("!Q", frames, 2)[0], 10
            if len(frames) < at + size:
                break
            if opcode in (1, 2, 0):
                out += frames[at : at + size]
            elif opcode == 8:
                closed = True
            del frames[: at + size]
        return bytes(out), closed

    async def run(self) -> None:
        assert self._reader is not None
        stamps = self.stamps
        while not stamps.all_seen.is_set():
            data = await self._reader.read(READ_SIZE)
            if not data:
                return
            self.bytes += len(data)
            self._frames += data
            payload, closed = self._payloads()
            if payload:
                stamps.take(payload, time.monotonic_ns())
            if closed:
                return

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()


def events_path(session_id: str, after: int) -> str:
    return f"/v1/sessions/{session_id}/events?after={after}"

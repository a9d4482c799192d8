"""The HTTP/1.1 plumbing of the stub: reading a request, writing heads and chunks, and the
connection a handler answers on (cut on purpose, or kept alive with pings)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from tests.stub_llm.plans import KEEPALIVE_SECONDS, reason_phrase
from tests.stub_llm.recorded import RecordedRequest

MAX_HEADER_BYTES = 64 * 1024
STREAM_LIMIT = 16 * 1024 * 1024


class ClientGone(Exception):
    """The client closed the connection while we were answering."""


class BadRequest(Exception):
    pass


class Cut(Exception):
    """The stub dropped the connection on purpose (``[[cut]]``)."""


@dataclass
class Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def gone(self) -> bool:
        return self.writer.is_closing() or self.reader.at_eof()

    async def send(self, data: bytes) -> None:
        if self.writer.is_closing():
            raise ClientGone
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise ClientGone from exc

    async def cut(self) -> NoReturn:
        """Drop the connection now (what was written so far is flushed first)."""
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.writer.drain()
        self.writer.close()
        raise Cut

    async def keep_alive(self, ping: bytes) -> NoReturn:
        """Send ``ping`` (nothing, if empty) every ``KEEPALIVE_SECONDS`` until the client leaves."""
        while True:
            await asyncio.sleep(KEEPALIVE_SECONDS)
            if self.gone():
                raise ClientGone
            if ping:
                await self.send(ping)


async def read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    """Read one HTTP/1.1 request; None on a clean EOF between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise BadRequest("truncated request head") from exc
        return None
    except asyncio.LimitOverrunError as exc:
        raise BadRequest("request head too large") from exc
    if len(head) > MAX_HEADER_BYTES:
        raise BadRequest("request head too large")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest(f"bad request line {lines[0]!r}")
    method, target, _version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequest(f"bad header line {line!r}")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raw = await _read_chunked(reader)
    else:
        length = int(headers.get("content-length") or 0)
        raw = await reader.readexactly(length) if length > 0 else b""
    body: Any = None
    if raw:
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
    return RecordedRequest(method.upper(), target, headers, raw, body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    data = bytearray()
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            # trailers, then the empty line
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return bytes(data)
        data += await reader.readexactly(size)
        await reader.readexactly(2)


async def send_chunk(conn: Conn, data: bytes) -> None:
    await conn.send(b"%x\r\n%s\r\n" % (len(data), data))


async def end_chunks(conn: Conn) -> None:
    await conn.send(b"0\r\n\r\n")


def response_head(status: int, headers: Mapping[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {reason_phrase(status)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

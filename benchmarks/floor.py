"""The floor: the same agent process piped through a minimal asyncio relay to socket clients.

Run as ``python -m benchmarks.floor --port P --agent PATH`` (a separate process, like the
gateway, on uvloop when it is installed, as uvicorn uses it). It speaks just enough HTTP/1.1
for ``benchmarks.streams.SseStream``:

- ``GET /sub``: a chunked ``text/event-stream`` response; a ``: connected`` comment, then one
  SSE message (``id: <n>``, ``data: <the agent's stdout line>``) per line the agent prints;
- ``GET /run?n=N&rate=R&pad=B``: starts the agent on the first call (then keeps it, as the
  gateway keeps a live CLI), writes a stream-json user message ``bench n=N rate=R pad=B`` to
  its stdin and answers 202.

It batches as the gateway does: each read takes whatever the agent's pipe holds (up to 64 KiB),
its complete lines (a partial last line waits for the next read) become one chunk of SSE
messages, encoded once, and that same chunk is written to every subscriber: one socket write
per subscriber per batch, not per line.

No parsing, no numbering beyond a counter, no storage, no flow control (writes are buffered
without waiting for slow readers): what any relay of these lines must at least do.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from tests.gateway import free_port

ROOT = Path(__file__).resolve().parent.parent

STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
)
ACCEPTED = b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n"
READ_SIZE = 1 << 16
"""At most this much of the agent's output per read: what a pipe holds by default."""


def chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class Relay:
    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.subscribers: set[asyncio.StreamWriter] = set()
        self.process: asyncio.subprocess.Process | None = None
        self.pump: asyncio.Task[None] | None = None
        self.seq = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        target = urlsplit(head.split(b" ", 2)[1].decode())
        if target.path == "/sub":
            writer.write(STREAM_HEAD + chunk(b": connected\n\n"))
            self.subscribers.add(writer)
            with contextlib.suppress(ConnectionError):
                await reader.read()  # until the client hangs up
            self.subscribers.discard(writer)
            writer.close()
            return
        if target.path == "/run":
            query = {k: v[0] for k, v in parse_qs(target.query).items()}
            await self.run(query.get("n", "1"), query.get("rate", "0"), query.get("pad", "0"))
            writer.write(ACCEPTED)
            await writer.drain()
        writer.close()

    async def run(self, n: str, rate: str, pad: str) -> None:
        if self.process is None:
            self.process = await asyncio.create_subprocess_exec(
                self.agent,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=1 << 24,
            )
            self.pump = asyncio.create_task(self._pump())
        assert self.process.stdin is not None
        message = {
            "type": "user",
            "message": {"role": "user", "content": f"bench n={n} rate={rate} pad={pad}"},
        }
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    async def _pump(self) -> None:
        assert self.process is not None
        assert self.process.stdout is not None
        stdout = self.process.stdout
        partial = b""
        while data := await stdout.read(READ_SIZE):
            *lines, partial = (partial + data).split(b"\n")
            if not lines:
                continue  # no complete line yet
            first = self.seq + 1
            self.seq += len(lines)
            frame = chunk(
                b"".join(
                    [b"id: %d\ndata: %s\n\n" % (first + i, line) for i, line in enumerate(lines)]
                )
            )
            for writer in self.subscribers:
                writer.write(frame)


async def serve(port: int, agent: str) -> None:
    """Relay until SIGTERM, then stop the agent with us."""
    relay = Relay(agent)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    server = await asyncio.start_server(relay.handle, "127.0.0.1", port)
    async with server:
        await stop.wait()
    if relay.process is not None and relay.process.returncode is None:
        relay.process.kill()
        await relay.process.wait()


class FloorProcess:
    """The relay as a child process of the benchmark, with the client calls it answers."""

    def __init__(self, agent: Path) -> None:
        self.agent = agent
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    async def __aenter__(self) -> FloorProcess:
        # A long-lived child, started and left running: nothing here waits on it.
        self.process = subprocess.Popen(  # noqa: ASYNC220, S603 - our own interpreter and module
            [
                sys.executable,
                "-m",
                "benchmarks.floor",
                "--port",
                str(self.port),
                "--agent",
                str(self.agent),
            ],
            cwd=ROOT,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                await asyncio.sleep(0.02)  # the port is not open yet; bounded by the deadline
                continue
            writer.close()
            return self
        raise RuntimeError("the floor relay did not start")

    async def __aexit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            await asyncio.to_thread(self.process.wait, 10)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def run(self, n: int, rate: float = 0, pad: int = 0) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        writer.write(f"GET /run?n={n}&rate={rate}&pad={pad} HTTP/1.1\r\n\r\n".encode())
        answer = await reader.readuntil(b"\r\n\r\n")
        writer.close()
        if not answer.startswith(b"HTTP/1.1 202"):
            raise RuntimeError(f"floor refused the run: {answer!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--agent", required=True)
    args = parser.parse_args()
    try:
        import uvloop  # noqa: PLC0415 - optional, as in uvicorn

        uvloop.run(serve(args.port, args.agent))
    except ImportError:
        asyncio.run(serve(args.port, args.agent))


if __name__ == "__main__":
    main()

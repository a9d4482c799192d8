"""A TCP proxy on 127.0.0.1 in front of a gateway that a test can cut: ``sever()`` aborts
every connection through it at once, both ways, with no close frame and no FIN (as a network
that fails does); ``hold()`` keeps new connections waiting, accepted and not yet forwarded,
until ``release()`` (a client that tries to reconnect and cannot yet)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TIMEOUT_S = 30.0
CHUNK = 1 << 16


@dataclass(eq=False)
class _Link:
    """One client connection and its upstream one."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    pumps: list[asyncio.Task[None]] = field(default_factory=list)
    cut: bool = False

    def abort(self) -> None:
        self.cut = True
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.transport.abort()


class CutProxy:
    """``async with CutProxy(port) as proxy``: ``proxy.url`` reaches the gateway on ``port``."""

    def __init__(self, target_port: int) -> None:
        self._target = target_port
        self._server: asyncio.Server | None = None
        self._links: list[_Link] = []
        self._released = asyncio.Event()
        self._released.set()
        self._changed = asyncio.Event()
        self.accepted = 0
        """Connections accepted so far (held ones too)."""
        self.held = 0
        """Connections waiting for ``release()`` now."""

    async def __aenter__(self) -> CutProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()
        self.sever()
        assert self._server is not None
        self._server.close()
        tasks = [task for link in self._links for task in link.pumps]
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), 5)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def open(self) -> int:
        """Connections forwarded now."""
        return sum(1 for link in self._links if link.upstream is not None and not link.cut)

    def sever(self) -> None:
        """Abort every connection through the proxy now."""
        for link in self._links:
            if not link.cut:
                link.abort()
        self._touch()

    def hold(self) -> None:
        """New connections wait until ``release()``."""
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    def _touch(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, predicate: Callable[[], Any]) -> Any:
        async with asyncio.timeout(TIMEOUT_S):
            while not (value := predicate()):
                await self._changed.wait()
            return value

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = _Link(client=writer)
        self._links.append(link)
        self.accepted += 1
        self.held += 1
        self._touch()
        try:
            await self._released.wait()
        finally:
            self.held -= 1
        if link.cut:
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)
        except OSError:
            link.abort()
            return
        link.upstream = up_writer
        link.pumps = [
            asyncio.create_task(self._pump(reader, up_writer, link)),
            asyncio.create_task(self._pump(up_reader, writer, link)),
        ]
        self._touch()

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, link: _Link
    ) -> None:
        try:
            while data := await source.read(CHUNK):
                sink.write(data)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if not link.cut:
                link.abort()
                self._touch()

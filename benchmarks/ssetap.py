"""A client's view of one turn read from an SSE stream: when it was accepted, its first text
and its end, and the events and bytes read meanwhile."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

GATEWAY_ENDS = frozenset({"turn.completed", "turn.failed", "turn.interrupted"})


@dataclass
class Turn:
    """One prompt as its client saw it (monotonic ns); ``events``/``bytes`` read meanwhile."""

    start_ns: int = 0
    accepted_ns: int = 0  # the prompt's POST answered
    model_ns: int = 0  # the stub received the turn's model request
    first_text_ns: int = 0
    end_ns: int = 0
    chars: int = 0
    events: int = 0
    bytes: int = 0
    armed: bool = False  # direct: the thread reported busy for this prompt
    users: set[str] = field(default_factory=set)  # direct: ids of the prompt's own messages
    error: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def accepted_ms(self) -> float:
        return (self.accepted_ns - self.start_ns) / 1e6

    @property
    def model_ms(self) -> float:
        return (self.model_ns - self.start_ns) / 1e6

    @property
    def first_text_ms(self) -> float:
        return (self.first_text_ns - self.start_ns) / 1e6

    @property
    def done_ms(self) -> float:
        return (self.end_ns - self.start_ns) / 1e6


class SseTap:
    """Reads one SSE response in a task: counts its bytes and messages, and hands each
    message's ``data`` (with the time its last line was read) to ``on_message``."""

    def __init__(self, response: httpx.Response, on_message: Callable[[str, int], None]) -> None:
        self.response = response
        self.on_message = on_message
        self.bytes = 0
        self.messages = 0
        self.connected = asyncio.Event()
        self.task = asyncio.create_task(self._read(), name="peer-sse")

    async def _read(self) -> None:
        pending = b""
        data: list[bytes] = []
        async for chunk in self.response.aiter_raw():
            now = time.monotonic_ns()
            pending += chunk
            while (end := pending.find(b"\n")) >= 0:
                line, pending = pending[:end], pending[end + 1 :]
                self.bytes += len(line) + 1
                line = line.rstrip(b"\r")
                self.connected.set()  # the gateway's ": connected", OpenCode's server.connected
                if line.startswith(b"data:"):
                    data.append(line[5:].removeprefix(b" "))
                elif not line and data:
                    self.messages += 1
                    message, data = b"\n".join(data).decode(), []
                    self.on_message(message, now)

    def begin(self, turn: Turn) -> None:
        turn.events, turn.bytes = -self.messages, -self.bytes
        turn.start_ns = time.monotonic_ns()

    def end(self, turn: Turn, now: int) -> None:
        turn.end_ns = now
        turn.events += self.messages
        turn.bytes += self.bytes
        turn.done.set()

    async def close(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

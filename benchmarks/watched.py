"""One session of a gateway followed through its SSE stream, its turns run one at a time and
read as the client saw them (the coalescing benchmark's client)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field

import httpx

from benchmarks.harness import AUTH, Api, cpu_seconds
from benchmarks.ssetap import GATEWAY_ENDS, SseTap

TURN_LIMIT_S = 120.0
START_LIMIT_S = 90.0


@dataclass
class TurnRecord:
    """One turn as the SSE client saw it."""

    start_ns: int = 0
    end_ns: int = 0
    first_delta_ns: int = 0
    completed_ns: int = 0
    events: int = 0
    deltas: int = 0
    bytes: int = 0
    cpu_ms: float = 0.0
    texts: dict[str, list[str]] = field(default_factory=dict)
    completed: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def stream_s(self) -> float:
        return (self.completed_ns - self.first_delta_ns) / 1e9 if self.first_delta_ns else 0.0

    def intact(self, expected: str) -> bool:
        """Each message's deltas joined are its completed text, and the reply is ``expected``."""
        joined = {message: "".join(parts) for message, parts in self.texts.items()}
        return joined == self.completed and "".join(self.completed.values()) == expected


class Watched:
    """A session of one gateway with its SSE stream open, its turns run one at a time."""

    def __init__(self, api: Api, session_id: str, tap: SseTap | None = None) -> None:
        self.api = api
        self.session_id = session_id
        self.tap = tap
        self.turn: TurnRecord | None = None
        self.turns = 0

    @classmethod
    async def open(cls, api: Api, stack: contextlib.AsyncExitStack) -> Watched:
        watched = cls(api, await api.create_session())
        response = await stack.enter_async_context(
            api.http.stream(
                "GET",
                f"/v1/sessions/{watched.session_id}/events",
                headers={**AUTH, "Accept": "text/event-stream"},
                timeout=httpx.Timeout(40.0, read=None),
            )
        )
        response.raise_for_status()
        watched.tap = SseTap(response, watched._message)
        stack.push_async_callback(watched.tap.close)
        await asyncio.wait_for(watched.tap.connected.wait(), START_LIMIT_S)
        return watched

    def _message(self, data: str, now: int) -> None:
        turn = self.turn
        if turn is None or turn.done.is_set() or self.tap is None:
            return
        envelope = json.loads(data)
        kind = envelope.get("type")
        body = envelope.get("data") or {}
        if kind == "message.delta":
            turn.first_delta_ns = turn.first_delta_ns or now
            turn.deltas += 1
            turn.texts.setdefault(body["message_id"], []).append(body["text"])
        elif kind == "message.completed":
            turn.completed_ns = now
            turn.completed[body["message_id"]] = body["text"]
        elif kind in GATEWAY_ENDS:
            if kind != "turn.completed":
                turn.error = data[:2000]
            turn.end_ns = now
            turn.events += self.tap.messages
            turn.bytes += self.tap.bytes
            turn.done.set()

    async def run_turn(self, prompt: str) -> TurnRecord:
        assert self.tap is not None
        turn = self.turn = TurnRecord()
        turn.events, turn.bytes = -self.tap.messages, -self.tap.bytes
        cpu = cpu_seconds(self.api.pid)
        turn.start_ns = time.monotonic_ns()
        await self.api.start_turn(self.session_id, prompt)
        self.turns += 1
        waiter = asyncio.create_task(turn.done.wait())
        try:
            await asyncio.wait(
                {waiter, self.tap.task}, timeout=TURN_LIMIT_S, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            waiter.cancel()
        turn.cpu_ms = (cpu_seconds(self.api.pid) - cpu) * 1000
        if not turn.done.is_set():
            failure = self.tap.task.exception() if self.tap.task.done() else None
            raise RuntimeError(f"the turn did not end within {TURN_LIMIT_S} s: {failure!r}")
        if turn.error is not None:
            raise RuntimeError(f"the turn failed: {turn.error}")
        return turn

"""One stamped turn relayed to a set of subscribers, through the gateway or the floor.

Both sides are measured the same way: subscribers connect and are known to be subscribed
(their first body bytes arrived), the process's CPU meter starts, the agent is asked for
``n`` deltas at ``rate`` per second (0: as fast as it can), and every subscriber reads until
it has every delta. The span is first emission to last receipt.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from benchmarks.floor import FloorProcess
from benchmarks.harness import AUTH, Api, CpuMeter, percentile
from benchmarks.streams import SseStream, Stamps, WsStream, events_path

Transport = Literal["sse", "ws"]


@dataclass
class RelayResult:
    stamps: list[Stamps]
    cpu: CpuMeter
    timed_out: bool

    @property
    def delivered(self) -> int:
        return sum(s.seen for s in self.stamps)

    @property
    def delta_events(self) -> int:
        """``message.delta`` events delivered to all subscribers (the floor sends none)."""
        return sum(s.delta_events for s in self.stamps)

    @property
    def span_s(self) -> float:
        spans = [s.span_ns() for s in self.stamps if s.seen]
        return max(spans) / 1e9 if spans else float("nan")

    @property
    def events_per_s(self) -> float:
        """Deltas delivered to all subscribers per second of span."""
        return round(self.delivered / self.span_s, 1) if self.span_s else float("nan")

    def latency_ms(self, q: float) -> float:
        values = [v for s in self.stamps for v in s.latencies_ns()]
        return round(percentile(values, q) / 1e6, 3)

    @property
    def agent_rate(self) -> float | None:
        """Deltas per second the agent actually emitted (its closing message says)."""
        ends = [s.end for s in self.stamps if s.end is not None]
        if not ends:
            return None
        emitted, elapsed = ends[0]
        return round(emitted / (elapsed / 1e9), 1) if elapsed else None


async def _drive(
    streams: Sequence[SseStream | WsStream],
    meter: CpuMeter,
    start: asyncio.Future[None] | asyncio.Task[None],
    limit_s: float,
) -> bool:
    tasks = [asyncio.create_task(s.run()) for s in streams]
    meter.start()
    await start
    done, pending = await asyncio.wait(tasks, timeout=limit_s)
    meter.stop()
    for task in pending:
        task.cancel()
    for task in pending:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    for task in done:
        task.result()
    return bool(pending)


async def _open_all(streams: Sequence[SseStream | WsStream], batch: int = 100) -> None:
    for i in range(0, len(streams), batch):
        await asyncio.gather(*(s.open() for s in streams[i : i + batch]))


async def _close_all(streams: Sequence[SseStream | WsStream]) -> None:
    await asyncio.gather(*(s.aclose() for s in streams), return_exceptions=True)


async def through_gateway(
    api: Api,
    session_id: str,
    *,
    n: int,
    rate: float = 0,
    pad: int = 0,
    subscribers: int = 1,
    transport: Transport = "sse",
    limit_s: float = 120.0,
    extra: Sequence[SseStream] = (),
) -> RelayResult:
    """One turn of ``n`` deltas on a session whose process is already live (see ``warm``).

    ``extra`` streams (opened by the caller, e.g. a slow consumer) are read alongside but
    neither waited for nor counted.
    """
    after = await api.last_seq(session_id)
    stamps = [Stamps(n) for _ in range(subscribers)]
    streams: list[SseStream | WsStream] = [
        SseStream(api.port, events_path(session_id, after), s, headers=AUTH)
        if transport == "sse"
        else WsStream(api.port, session_id, after, s)
        for s in stamps
    ]
    await _open_all(streams)
    side = [asyncio.create_task(s.run()) for s in extra]
    turn = asyncio.ensure_future(api.start_turn(session_id, f"bench n={n} rate={rate} pad={pad}"))
    started: asyncio.Future[None] = asyncio.ensure_future(_await_turn(turn))
    meter = CpuMeter(api.pid)
    try:
        timed_out = await _drive(streams, meter, started, limit_s)
        turn_id = turn.result()
        if timed_out:
            with contextlib.suppress(Exception):
                await api.http.post(f"/v1/sessions/{session_id}/interrupt")
        await api.wait_turn(session_id, turn_id)
    finally:
        for task in side:
            task.cancel()
        await _close_all(streams)
    return RelayResult(stamps=stamps, cpu=meter, timed_out=timed_out)


async def _await_turn(turn: asyncio.Future[str]) -> None:
    await turn


async def warm(api: Api, session_id: str) -> None:
    """A first small turn, so the measured one finds the agent process running."""
    await api.run_turn(session_id, "bench n=10 rate=0")


async def through_floor(
    floor: FloorProcess,
    *,
    n: int,
    rate: float = 0,
    pad: int = 0,
    subscribers: int = 1,
    limit_s: float = 120.0,
) -> RelayResult:
    stamps = [Stamps(n) for _ in range(subscribers)]
    streams: list[SseStream | WsStream] = [SseStream(floor.port, "/sub", s) for s in stamps]
    await _open_all(streams)
    meter = CpuMeter(floor.pid)
    try:
        started = asyncio.ensure_future(floor.run(n, rate, pad))
        timed_out = await _drive(streams, meter, started, limit_s)
    finally:
        await _close_all(streams)
    return RelayResult(stamps=stamps, cpu=meter, timed_out=timed_out)


async def warm_floor(floor: FloorProcess) -> None:
    stamps = Stamps(10)
    stream = SseStream(floor.port, "/sub", stamps)
    await stream.open()
    await floor.run(10)
    await asyncio.wait_for(stream.run(), 30)
    await stream.aclose()

"""Event throughput and turn latency with webhooks on and off (and on, to a slow endpoint)."""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from dataclasses import dataclass, field
from datetime import datetime
from multiprocessing.connection import Connection
from statistics import median
from typing import Any

from benchmarks.harness import (
    Api,
    Section,
    Table,
    Target,
    bench_gateway,
    percentile,
    running,
    scratch,
)
from benchmarks.relay import through_gateway, warm
from benchmarks.settings import RunConfig
from tests.webhook_receiver import SECRET, Received, WebhookReceiver

EVENTS = [
    "session.idle",
    "turn.completed",
    "turn.failed",
    "turn.interrupted",
    "approval.requested",
    "question.asked",
    "provider.switched",
]
SLOW_S = 1.0
"""How long the slow endpoint takes to answer each delivery."""
MEASURES = (
    "The benchmark agent behind `python -m app serve` (SQLite on disk), three gateways run "
    "side by side and measured in turn, round after round: no "
    "endpoint (webhooks off); one endpoint on loopback for every event type a turn makes "
    "(`turn.completed` and `session.idle` each turn), answering at once; and the same "
    f"endpoint answering each delivery after {SLOW_S:g} s. Throughput: one turn of N deltas "
    "to one SSE client, as benchmark 1 (deltas make no webhook message: this is the cost of "
    "the outbox check on every batch). Turn latency: sequential short turns (`fake reply`) "
    "in one live session, each timed by its own `created_at` → `finished_at`. Delivery: from "
    "an event's `at` to its arrival at the receiver (a process of its own), which verifies "
    "every delivery with the `standardwebhooks` library."
)


async def _turns(api: Api, session: str, count: int) -> list[float]:
    times: list[float] = []
    for _ in range(count):
        turn_id = await api.start_turn(session, "hello")
        assert await api.wait_turn(session, turn_id) == "completed"
        turn = (await api.http.get(f"/v1/sessions/{session}/turns/{turn_id}")).json()
        started = _moment(turn["created_at"])
        times.append((_moment(turn["finished_at"]) - started) * 1000)
    return times


def _moment(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def _lag_ms(received: Received) -> float:
    return (received.arrived - _moment(received.payload["timestamp"])) * 1000


def _serve(answer_after_s: float, connection: Connection) -> None:
    """The receiver, in a process of its own (its work never shares the client's GIL): sends
    its URL, then on any message the delivery lags it measured, and stops."""

    def answer(received: Received) -> int:
        time.sleep(answer_after_s)  # in the receiver's own thread for this request
        return 200

    with WebhookReceiver(answer=answer if answer_after_s else None) as receiver:
        connection.send(receiver.url)
        connection.recv()
        connection.send([_lag_ms(r) for r in receiver.received])


class _Receiver:
    """A ``WebhookReceiver`` in a child process."""

    def __init__(self, answer_after_s: float = 0.0) -> None:
        self._ours, theirs = multiprocessing.get_context("spawn").Pipe()
        self._process = multiprocessing.get_context("spawn").Process(
            target=_serve, args=(answer_after_s, theirs), daemon=True
        )
        self.url = ""

    def __enter__(self) -> _Receiver:
        self._process.start()
        self.url = self._ours.recv()
        return self

    def lags(self) -> list[float]:
        """Stop it; the lag of each delivery it verified (ms)."""
        self._ours.send("stop")
        lags: list[float] = self._ours.recv()
        return lags

    def __exit__(self, *exc: object) -> None:
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.kill()


@dataclass
class _Way:
    """One configuration under measurement, and what it measured so far."""

    label: str
    receiver: _Receiver | None
    api: Api | None = None
    session: str = ""
    rates: list[float] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "webhooks": self.label,
            "deltas/s (median)": round(median(self.rates)),
            "turn p50 ms": round(median(self.times), 1),
            "turn p95 ms": round(percentile(self.times, 95), 1),
        }
        if self.receiver is not None:
            lags = self.receiver.lags()
            row["deliveries"] = len(lags)
            row["delivery p50 ms"] = round(median(lags), 1) if lags else None
        return row


async def _measure(ways: list[_Way], *, n: int, rounds: int, turns: int, limit_s: float) -> None:
    """Every way's gateway at once, measured in turn round after round (the machine's load
    drifts alike for all of them)."""
    async with contextlib.AsyncExitStack() as stack:
        for way in ways:
            base = stack.enter_context(scratch("webhooks"))
            hooks: dict[str, Any] = {"allow_http_hosts": ["127.0.0.1"]}
            if way.receiver is not None:
                hooks["endpoints"] = [{"url": way.receiver.url, "secret": SECRET, "events": EVENTS}]
            way.api = await stack.enter_async_context(running(bench_gateway(base, webhooks=hooks)))
            way.session = await way.api.create_session()
            await warm(way.api, way.session)
        for _ in range(rounds):
            for way in ways:
                assert way.api is not None
                relay = await through_gateway(way.api, way.session, n=n, limit_s=limit_s)
                way.rates.append(relay.events_per_s)
                way.times += await _turns(way.api, way.session, turns)


async def run(config: RunConfig) -> Section:
    n = config.pick(quick=2000, full=10000)
    rounds = config.pick(quick=5, full=10)
    turns = config.pick(quick=5, full=10)
    section = Section(name="webhooks", title="16. Webhooks", measures=MEASURES)
    with _Receiver() as fast, _Receiver(SLOW_S) as slow:
        ways = [
            _Way("off", None),
            _Way("on", fast),
            _Way(f"on, endpoint answering in {SLOW_S:g} s", slow),
        ]
        await _measure(ways, n=n, rounds=rounds, turns=turns, limit_s=config.timeout(n))
        rows = [way.row() for way in ways]
    section.tables.append(
        Table(title=f"{rounds} rounds of {n} deltas then {turns} turns, each way", rows=rows)
    )
    off, on, slowed = rows
    added = round(on["turn p50 ms"] - off["turn p50 ms"], 1)
    section.targets.append(
        Target(
            name="turn latency added by webhooks (p50)",
            goal="<= 5 ms",
            value=f"{added:+} ms",
            met=added <= 5,
        )
    )
    slower = round(slowed["turn p50 ms"] - on["turn p50 ms"], 1)
    section.targets.append(
        Target(
            name=f"turn latency with an endpoint taking {SLOW_S:g} s (p50, vs a fast one)",
            goal="<= 5 ms",
            value=f"{slower:+} ms",
            met=slower <= 5,
        )
    )
    rate = on["deltas/s (median)"] / off["deltas/s (median)"]
    section.notes.append(f"Deltas/s with webhooks on: {rate:.2f}x off (medians of the rounds).")
    return section

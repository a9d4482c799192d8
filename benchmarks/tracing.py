"""Tracing on vs off: event throughput and turn latency of the same gateway, with and without
its spans exported to a collector on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

from benchmarks.harness import (
    Api,
    Section,
    Table,
    Target,
    bench_gateway,
    cpu_seconds,
    percentile,
    scratch,
)
from benchmarks.relay import RelayResult, through_gateway, warm
from benchmarks.settings import RunConfig
from benchmarks.watched import START_LIMIT_S, TurnRecord, Watched
from tests.otlp import OtlpReceiver

OFF, ON = "off (default)", "on, exported"
PROMPT = "bench n=20 rate=0"
"""A short turn: 20 text deltas as fast as the agent prints them, then its answer."""

MEASURES = (
    "Two gateways side by side (`python -m app serve`, SQLite on disk, the benchmark agent), "
    "one without `[telemetry]` (tracing off: the default) and one with `telemetry.otlp_endpoint`"
    " naming a collector on 127.0.0.1 (tests/otlp.py in the benchmark's process, decoding every"
    " export; the SDK's default batching: a batch every 5 s or 512 spans). They take turns, so "
    "drift in the machine's load falls on both. **Turns**: one session each with its SSE "
    "stream open; warm-up turns, then rounds of one turn on each (`bench n=20 rate=0`: 20 "
    "deltas and an answer), timed from just before `POST …/turns` to `turn.completed` on the "
    "stream; gateway CPU per turn is the gateway process's user + system time over all the "
    "measured turns (10 ms ticks: summed over the phase, then divided). "
    "**Throughput**: rounds of one relay each (the agent prints N deltas as fast as the pipe "
    "takes them, one SSE client; deltas/s = deltas / (last receipt - first emission); CPU per "
    "delta = the gateway's CPU over the relay / deltas: what tracing adds to each event, "
    "which unlike wall time does not depend on what else the machine runs), "
    "medians over the rounds. Spans: what the collector received per turn, counted once the "
    "gateway stopped (its last batch is exported at shutdown), the median over the turns' traces."
)


@contextlib.asynccontextmanager
async def _gateways(base: Path, endpoint: str) -> AsyncIterator[dict[str, Api]]:
    """The two gateways, started together."""
    made = {
        OFF: bench_gateway(base / "off"),
        ON: bench_gateway(base / "on", telemetry={"otlp_endpoint": endpoint}),
    }
    async with contextlib.AsyncExitStack() as stack:
        for gateway in made.values():
            stack.push_async_callback(asyncio.to_thread, gateway.stop)
        await asyncio.gather(*(asyncio.to_thread(g.start, START_LIMIT_S) for g in made.values()))
        yield {
            label: await stack.enter_async_context(Api(gateway)) for label, gateway in made.items()
        }


@dataclass
class Measured:
    turns: list[TurnRecord] = field(default_factory=list)
    turns_cpu_s: float = 0.0
    """The gateway's CPU over the whole phase of measured turns (its 10 ms ticks add up)."""
    relays: list[RelayResult] = field(default_factory=list)


async def _measure(
    apis: dict[str, Api], *, warmups: int, rounds: int, relays: int, n: int
) -> dict[str, Measured]:
    measured = {label: Measured() for label in apis}
    async with contextlib.AsyncExitStack() as stack:
        watched = {label: await Watched.open(api, stack) for label, api in apis.items()}
        for _ in range(warmups):
            for session in watched.values():
                await session.run_turn(PROMPT)
        before = {label: cpu_seconds(api.pid) for label, api in apis.items()}
        order = list(apis)
        for _ in range(rounds):
            for label in order:
                measured[label].turns.append(await watched[label].run_turn(PROMPT))
            order.reverse()
        for label, api in apis.items():
            measured[label].turns_cpu_s = cpu_seconds(api.pid) - before[label]
    sessions = {label: await api.create_session() for label, api in apis.items()}
    for label, api in apis.items():
        await warm(api, sessions[label])
    order = list(apis)
    for _ in range(relays):
        for label in order:
            measured[label].relays.append(await through_gateway(apis[label], sessions[label], n=n))
        order.reverse()
    return measured


def _turn_ms(turns: list[TurnRecord]) -> list[float]:
    return [(t.end_ns - t.start_ns) / 1e6 for t in turns]


def _cpu_ms_per_turn(m: Measured) -> float:
    return m.turns_cpu_s * 1000 / len(m.turns)


def _cpu_us_per_delta(m: Measured) -> float:
    return median(r.cpu.cpu_s / r.delivered * 1e6 for r in m.relays if r.delivered)


def _turn_row(label: str, m: Measured, spans: float | None) -> dict[str, object]:
    done = _turn_ms(m.turns)
    return {
        "tracing": label,
        "turns": len(done),
        "turn p50 ms": round(median(done), 2),
        "turn p95 ms": round(percentile(done, 95), 2),
        "gateway CPU ms/turn": round(_cpu_ms_per_turn(m), 2),
        "spans/turn (median)": "-" if spans is None else spans,
    }


def _relay_row(label: str, m: Measured) -> dict[str, object]:
    return {
        "tracing": label,
        "deltas": m.relays[0].delivered,
        "deltas/s (median)": round(median(r.events_per_s for r in m.relays)),
        "gateway CPU µs/delta": round(_cpu_us_per_delta(m), 2),
        "p50 latency ms": round(median(r.latency_ms(50) for r in m.relays), 3),
    }


def _more(name: str, on: float, off: float, unit: str, allowed: float) -> Target:
    """A target: ``on`` at most ``allowed`` (a fraction) above ``off``."""
    return Target(
        name=f"{name}, tracing on vs off",
        goal=f"<= +{allowed:.0%}",
        value=f"{on:.2f} vs {off:.2f} {unit} ({(on / off - 1) * 100:+.1f} %)",
        met=on <= off * (1 + allowed),
    )


async def run(config: RunConfig) -> Section:
    warmups, rounds = config.pick(quick=3, full=5), config.pick(quick=10, full=40)
    relays, n = config.pick(quick=2, full=3), config.pick(quick=2000, full=10000)
    section = Section(name="tracing", title="15. Tracing on vs off", measures=MEASURES)
    with scratch("tracing") as base, OtlpReceiver() as collector:
        async with _gateways(base, collector.endpoint) as apis:
            measured = await _measure(apis, warmups=warmups, rounds=rounds, relays=relays, n=n)
        # Stopped: every span has been exported. Each turn is a trace of its own (its POST's).
        traces = {s.trace_id for s in collector.spans if s.name == "turn"}
        per_trace = [sum(1 for s in collector.spans if s.trace_id == t) for t in traces]
    off, on = measured[OFF], measured[ON]
    section.tables += [
        Table(
            title=f"{rounds} turns of 20 deltas each (after {warmups} warm-up turns)",
            rows=[_turn_row(OFF, off, None), _turn_row(ON, on, median(per_trace))],
        ),
        Table(
            title=f"{n} deltas as fast as the agent prints them, one SSE client ({relays} rounds)",
            rows=[_relay_row(label, m) for label, m in measured.items()],
        ),
    ]
    off_ms, on_ms = median(_turn_ms(off.turns)), median(_turn_ms(on.turns))
    off_rate, on_rate = (median(r.events_per_s for r in m.relays) for m in (off, on))
    section.targets += [
        _more("gateway CPU per turn", _cpu_ms_per_turn(on), _cpu_ms_per_turn(off), "ms", 0.10),
        _more(
            "gateway CPU per streamed delta",
            _cpu_us_per_delta(on),
            _cpu_us_per_delta(off),
            "µs",
            0.10,
        ),
        _more("turn latency p50", on_ms, off_ms, "ms", 0.05),
        Target(
            name="event throughput, tracing on vs off",
            goal=">= 0.9x",
            value=f"{on_rate:.0f} vs {off_rate:.0f} deltas/s ({on_rate / off_rate:.2f}x)",
            met=on_rate >= off_rate * 0.9,
        ),
    ]
    section.notes.append(
        "Off, the gateway makes no span at all (the SDK is not imported: every instrumented "
        "point returns a shared no-op); on, a turn is its request's span, the turn, each "
        "attempt, the store calls made inside them and the event log's batched writes, all "
        "handed to the SDK's batch processor, whose thread encodes and sends them."
    )
    return section

"""Tracing on vs off: event throughput and turn latency of the same gateway, with and without
its spans exported to a collector on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
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

OFF, AGAIN, ON = "off (default)", "off, a second one", "on, exported"
PROMPT = "bench n=20 rate=0"
"""A short turn: 20 text deltas as fast as the agent prints them, then its answer."""

MEASURES = (
    "Three gateways side by side (`python -m app serve`, SQLite on disk, the benchmark agent), "
    "two without `[telemetry]` (tracing off: the default) and one with `telemetry.otlp_endpoint`"
    " naming a collector on 127.0.0.1 (tests/otlp.py in the benchmark's process, decoding every"
    " export; the SDK's default batching: a batch every 5 s or 512 spans). They take turns, so "
    "drift in the machine's load falls on all of them. **Turns**: one session each with its SSE "
    "stream open; warm-up turns, then rounds of one turn on each (`bench n=20 rate=0`: 20 "
    "deltas and an answer), timed from just before `POST …/turns` to `turn.completed` on the "
    "stream; gateway CPU per turn is the gateway process's user + system time over all the "
    "measured turns (10 ms ticks: summed over the phase, then divided). "
    "**Throughput**: rounds of one relay each (the agent prints N deltas as fast as the pipe "
    "takes them, one SSE client; deltas/s = deltas / (last receipt - first emission), the "
    "median over the rounds; CPU per delta = the gateway's CPU over all the relays / their "
    "deltas: what tracing adds to each event, which unlike wall time does not depend on what "
    "else the machine runs). Spans: what the collector received per turn, counted once the "
    "gateway stopped (its last batch is exported at shutdown), the median over the turns' traces."
)


@contextlib.asynccontextmanager
async def _gateways(base: Path, endpoint: str) -> AsyncIterator[dict[str, Api]]:
    """The two gateways, started together."""
    made = {
        OFF: bench_gateway(base / "off"),
        AGAIN: bench_gateway(base / "again"),
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
            order = order[1:] + order[:1]
        for label, api in apis.items():
            measured[label].turns_cpu_s = cpu_seconds(api.pid) - before[label]
    sessions = {label: await api.create_session() for label, api in apis.items()}
    for label, api in apis.items():
        await warm(api, sessions[label])
    order = list(apis)
    for _ in range(relays):
        for label in order:
            measured[label].relays.append(await through_gateway(apis[label], sessions[label], n=n))
        order = order[1:] + order[:1]
    return measured


def _turn_ms(turns: list[TurnRecord]) -> list[float]:
    return [(t.end_ns - t.start_ns) / 1e6 for t in turns]


def _turn_p50(m: Measured) -> float:
    return median(_turn_ms(m.turns))


def _cpu_ms_per_turn(m: Measured) -> float:
    return m.turns_cpu_s * 1000 / len(m.turns)


def _cpu_us_per_delta(m: Measured) -> float:
    """Over every relay together (each reads 10 ms ticks)."""
    return sum(r.cpu.cpu_s for r in m.relays) / sum(r.delivered for r in m.relays) * 1e6


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


PROBE = """
import os, sys, time
def rss(): return int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
{before}
resident = rss()
started = time.perf_counter()
{measured}
elapsed = time.perf_counter() - started
print(elapsed * 1000, (rss() - resident) / 2**20)
"""
"""Times importing ``measured`` in a fresh interpreter, after ``before``."""
TRACING_MODULES = (
    "import app.observability.spanfilter\n"
    "import opentelemetry.exporter.otlp.proto.http.trace_exporter"
)


def _fastest(before: str, measured: str, runs: int) -> tuple[float, float]:
    """The fastest of ``runs`` fresh interpreters importing ``measured`` after ``before``: its
    milliseconds and the MiB of resident memory it added."""
    best = (float("inf"), 0.0)
    for _ in range(runs):
        out = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
            [sys.executable, "-c", PROBE.format(before=before, measured=measured)],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent.parent,
        ).stdout.split()
        best = min(best, (float(out[0]), float(out[1])))
    return best


def _sdk_import_ms(code: str) -> float:
    """Milliseconds a fresh interpreter running ``code`` spends importing the SDK's own
    modules (``-X importtime``, their self times summed)."""
    report = subprocess.run(  # noqa: S603 - this interpreter, a fixed script
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    total_us = 0
    for line in report.splitlines():
        fields = line.removeprefix("import time:").split("|")
        if len(fields) == 3 and fields[2].strip().startswith("opentelemetry.sdk"):
            total_us += int(fields[0])
    return total_us / 1000


def _imports(runs: int) -> list[dict[str, object]]:
    """What tracing's packages cost a gateway's start: the SDK and exporter (only with tracing
    on), and redis-py's own import of the SDK's metrics package (whenever it is installed)."""
    sdk_ms, sdk_mib = _fastest("import app.main", TRACING_MODULES, runs)
    hidden = _fastest("sys.modules['opentelemetry.sdk.metrics'] = None", "import redis", runs)
    found = _fastest("", "import redis", runs)
    by_redis = min(_sdk_import_ms("import redis") for _ in range(runs))
    return [
        {
            "import": "the SDK and its OTLP/HTTP exporter (only with tracing on)",
            "ms (fastest)": round(sdk_ms, 1),
            "MiB": round(sdk_mib, 1),
        },
        {
            "import": "redis-py loading the SDK's metrics package (with the SDK installed)",
            "ms (fastest)": round(by_redis, 1),
            "MiB": round(found[1] - hidden[1], 1),
        },
    ]


def _more(name: str, values: tuple[float, float, float], unit: str, allowed: float) -> Target:
    """A target: ``on`` at most ``allowed`` (a fraction) above ``off``; ``values`` are
    (on, off, the second untraced gateway's)."""
    on, off, again = values
    return Target(
        name=f"{name}, tracing on vs off",
        goal=f"<= +{allowed:.0%}",
        value=f"{on:.2f} vs {off:.2f} {unit} ({(on / off - 1) * 100:+.1f} %; two untraced "
        f"gateways: {(again / off - 1) * 100:+.1f} %)",
        met=on <= off * (1 + allowed),
    )


def _each(
    figure: Callable[[Measured], float], on: Measured, off: Measured, again: Measured
) -> tuple[float, float, float]:
    return figure(on), figure(off), figure(again)


async def run(config: RunConfig) -> Section:
    warmups, rounds = config.pick(quick=3, full=5), config.pick(quick=20, full=100)
    relays, n = config.pick(quick=2, full=5), config.pick(quick=5000, full=20000)
    section = Section(name="tracing", title="15. Tracing on vs off", measures=MEASURES)
    with scratch("tracing") as base, OtlpReceiver() as collector:
        async with _gateways(base, collector.endpoint) as apis:
            measured = await _measure(apis, warmups=warmups, rounds=rounds, relays=relays, n=n)
        # Stopped: every span has been exported. Each turn is a trace of its own (its POST's).
        traces = {s.trace_id for s in collector.spans if s.name == "turn"}
        per_trace = [sum(1 for s in collector.spans if s.trace_id == t) for t in traces]
    off, on = measured[OFF], measured[ON]
    imports = await asyncio.to_thread(_imports, config.pick(quick=3, full=5))
    section.tables += [
        Table(
            title=f"{rounds} turns of 20 deltas each (after {warmups} warm-up turns)",
            rows=[
                _turn_row(OFF, off, None),
                _turn_row(AGAIN, measured[AGAIN], None),
                _turn_row(ON, on, median(per_trace)),
            ],
        ),
        Table(
            title=f"{n} deltas as fast as the agent prints them, one SSE client ({relays} rounds)",
            rows=[_relay_row(label, m) for label, m in measured.items()],
        ),
        Table(title="start-up: what tracing's packages cost to import, off or on", rows=imports),
    ]
    again = measured[AGAIN]
    off_rate, on_rate = (median(r.events_per_s for r in m.relays) for m in (off, on))
    section.targets += [
        _more("gateway CPU per turn", _each(_cpu_ms_per_turn, on, off, again), "ms", 0.10),
        _more(
            "gateway CPU per streamed delta", _each(_cpu_us_per_delta, on, off, again), "µs", 0.10
        ),
        _more("turn latency p50", _each(_turn_p50, on, off, again), "ms", 0.05),
        Target(
            name="event throughput, tracing on vs off",
            goal=">= 0.9x",
            value=f"{on_rate:.0f} vs {off_rate:.0f} deltas/s ({on_rate / off_rate:.2f}x)",
            met=on_rate >= off_rate * 0.9,
        ),
    ]
    section.notes += [
        "Off, the gateway makes no span at all (it imports neither the SDK's tracing nor the "
        "exporter: every instrumented point returns a shared no-op); on, a turn is its "
        "request's span, the turn, each attempt, the store calls made inside them and the "
        "event log's batched writes, all "
        "handed to the SDK's batch processor, whose thread encodes and sends them. That work "
        "is what a traced turn costs: the SDK's Python makes a span in tens of microseconds "
        "and its exporter encodes one in about as many again (one process, so the exporting "
        "thread takes its turns at the interpreter with the event loop); a streamed delta "
        "makes no span of its own. Fewer traces cost less: `OTEL_TRACES_SAMPLER="
        "parentbased_traceidratio` with `OTEL_TRACES_SAMPLER_ARG=0.1` records one in ten.",
        "The second untraced gateway, measured like the others, shows how far two identical "
        "gateways differ in this run on this machine: read the on-off differences against "
        "it. The start-up table runs fresh interpreters (`python -c`), the fastest of "
        "several; the redis-py row is the time its import spends in the SDK's modules (`-X "
        "importtime`) and the memory it takes more than with the SDK's metrics package hidden.",
    ]
    return section

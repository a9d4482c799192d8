"""Fan-out: one session's deltas to 1, 100 and 1,000 subscribers (SSE and WebSocket)."""

from __future__ import annotations

import math

from benchmarks.floor import FloorProcess
from benchmarks.harness import (
    Section,
    Table,
    Target,
    bench_gateway,
    install_agent,
    ratio,
    running,
    scratch,
)
from benchmarks.relay import RelayResult, through_floor, through_gateway, warm, warm_floor
from benchmarks.settings import RunConfig

MEASURES = (
    "One session, one agent emitting deltas at 100 per second, read by N subscribers on one "
    "client process (uvloop, raw sockets for SSE and for WebSocket, frames parsed by hand). "
    "Delivery latency is receipt minus emission over every (subscriber, event) "
    "pair; relay CPU is the relay process's utime+stime delta (from /proc/<pid>/stat) over "
    "the run, in cores. The client shares the machine's 2 cores with the relay, so at 1,000 "
    "subscribers part of the latency is the client's own. Throughput: the same with the agent "
    "unpaced, deliveries (deltas x subscribers) per second. The gateway runs with "
    "`server.coalesce_deltas_ms = 0`, every delta its own event as the floor sends every "
    "line: this measures fan-out alone (joining is measured by benchmarks 1 and 13)."
)


def row(name: str, subscribers: int, result: RelayResult) -> dict[str, object]:
    return {
        "relay": name,
        "subscribers": subscribers,
        "deliveries": result.delivered,
        "p50 ms": result.latency_ms(50),
        "p99 ms": result.latency_ms(99),
        "relay CPU (cores)": result.cpu.core_share,
        "relay CPU s": round(result.cpu.cpu_s, 2),
    }


async def run(config: RunConfig) -> Section:
    seconds = config.pick(quick=1, full=3)
    sizes = [1, 100, 1000] if not config.quick else [1, 100]
    burst_subscribers = 100
    burst = config.pick(quick=300, full=1000)
    section = Section(name="fanout", title="3. Fan-out", measures=MEASURES)
    rows: list[dict[str, object]] = []
    paced: dict[tuple[str, int], RelayResult] = {}
    with scratch("floor") as base:
        async with FloorProcess(install_agent(base)) as floor:
            await warm_floor(floor)
            for size in sizes:
                paced["floor", size] = await through_floor(
                    floor, n=100 * seconds, rate=100, subscribers=size
                )
            floor_burst = await through_floor(floor, n=burst, subscribers=burst_subscribers)
    with scratch("fanout") as base:
        # Every delta its own event, as the floor sends each line (joining is measured in
        # the throughput and coalescing benchmarks).
        async with running(bench_gateway(base, server={"coalesce_deltas_ms": 0})) as api:
            session = await api.create_session()
            await warm(api, session)
            for transport in ("sse", "ws"):
                for size in sizes:
                    paced[f"gateway {transport}", size] = await through_gateway(
                        api,
                        session,
                        n=100 * seconds,
                        rate=100,
                        subscribers=size,
                        transport=transport,
                        limit_s=60 + size * 0.1,
                    )
            gateway_burst = await through_gateway(
                api,
                session,
                n=burst,
                subscribers=burst_subscribers,
                limit_s=config.timeout(burst * 10),
            )
    for (name, size), result in paced.items():
        rows.append(row(name, size, result))
    section.tables.append(Table(title=f"{100 * seconds} deltas at 100/s", rows=rows))
    burst_rows = [
        {
            "relay": name,
            "subscribers": burst_subscribers,
            "deliveries": result.delivered,
            "deliveries/s": result.events_per_s,
            "x floor": ratio(result.events_per_s, floor_burst.events_per_s),
            "relay CPU (cores)": result.cpu.core_share,
        }
        for name, result in (("floor", floor_burst), ("gateway sse", gateway_burst))
    ]
    section.tables.append(Table(title=f"{burst} deltas unpaced", rows=burst_rows))
    fan_ratio = ratio(gateway_burst.events_per_s, floor_burst.events_per_s)
    p99 = paced["gateway sse", 100].latency_ms(99)
    section.targets += [
        Target(
            name=f"fan-out throughput, {burst_subscribers} SSE subscribers",
            goal=">= 0.6x floor",
            value=f"{fan_ratio}x",
            met=fan_ratio >= 0.6,
        ),
        Target(
            name="delivery p99, 100 SSE subscribers x 100 events/s",
            goal="< 50 ms",
            value=f"{p99} ms",
            met=p99 < 50,
        ),
    ]
    if ("floor", 1000) in paced:  # the full run only
        section.targets += [
            thousand(paced[f"gateway {transport}", 1000], paced["floor", 1000], label)
            for transport, label in (("sse", "SSE"), ("ws", "WebSocket"))
        ]
    return section


def thousand(result: RelayResult, floor: RelayResult, transport: str) -> Target:
    """The gateway's delivery p99 to 1,000 subscribers against the floor's in the same run."""
    p99, floor_p99 = result.latency_ms(99), floor.latency_ms(99)
    times = ratio(p99, floor_p99)
    return Target(
        name=f"delivery p99, 1,000 {transport} subscribers x 100 events/s",
        goal="<= 3x floor",
        value=f"{p99:.1f} ms vs floor {floor_p99:.1f} ms ({times:.1f}x)",
        met=None if math.isnan(times) else times <= 3,
    )

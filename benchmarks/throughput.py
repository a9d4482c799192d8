"""Relay throughput: stamped deltas as fast as the agent prints them, to one SSE client."""

from __future__ import annotations

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

DEFAULT = "gateway (disk), deltas joined (default, 16 ms)"
UNJOINED = "gateway (disk), every delta an event (0 ms)"
JOINED = {DEFAULT: 16.0, UNJOINED: 0.0}
"""``server.coalesce_deltas_ms`` of each gateway row."""

MEASURES = (
    "A warm agent process prints N `message.delta` lines as fast as the pipe takes them; one "
    "SSE client counts them. Deltas/s = deltas received / (last receipt - first emission). "
    "Gateway: `python -m app serve` with its SQLite file on the disk, once with its default "
    "delta coalescing (consecutive deltas within 16 ms become one `message.delta` event; "
    "`delta events` counts the events they arrived in) and once with it off. Floor: the same agent "
    "behind `benchmarks/floor.py`, a minimal asyncio relay that batches as the gateway does "
    "(read what the pipe holds, one SSE chunk of its complete lines, one write per client), "
    "read by the same client."
)


def row(name: str, result: RelayResult, floor: float | None) -> dict[str, object]:
    return {
        "relay": name,
        "deltas": result.delivered,
        "delta events": result.delta_events if floor else "-",
        "deltas/s": result.events_per_s,
        "x floor": ratio(result.events_per_s, floor) if floor else 1.0,
        "relay CPU (cores)": result.cpu.core_share,
        "p50 latency ms": result.latency_ms(50),
        "p99 latency ms": result.latency_ms(99),
    }


async def run(config: RunConfig) -> Section:
    n = config.pick(quick=2000, full=10000)
    section = Section(name="throughput", title="1. Relay throughput", measures=MEASURES)
    with scratch("floor") as base:
        async with FloorProcess(install_agent(base)) as floor:
            await warm_floor(floor)
            floor_result = await through_floor(floor, n=n)
    results: dict[str, RelayResult] = {}
    for label, window_ms in JOINED.items():
        with scratch("throughput") as base:
            gateway = bench_gateway(base, server={"coalesce_deltas_ms": window_ms})
            async with running(gateway) as api:
                session = await api.create_session()
                await warm(api, session)
                results[label] = await through_gateway(api, session, n=n, limit_s=config.timeout(n))
    floor_rate = floor_result.events_per_s
    section.tables.append(
        Table(
            title=f"{n} deltas, one SSE client",
            rows=[
                row("floor", floor_result, None),
                *(row(label, result, floor_rate) for label, result in results.items()),
            ],
        )
    )
    gateway_result = results[DEFAULT]
    value = ratio(gateway_result.events_per_s, floor_rate)
    section.targets.append(
        Target(
            name="throughput, event log persisted",
            goal=">= 0.5x floor",
            value=f"{value}x ({gateway_result.events_per_s:.0f} vs {floor_rate:.0f} deltas/s)",
            met=value >= 0.5,
        )
    )
    unjoined = results[UNJOINED]
    section.notes.append(
        f"Every delta its own event (`server.coalesce_deltas_ms = 0`): "
        f"{ratio(unjoined.events_per_s, floor_rate)}x the floor "
        f"({unjoined.events_per_s:.0f} deltas/s)."
    )
    if gateway_result.timed_out:
        section.notes.append("The gateway did not deliver every delta before the time limit.")
    config.shared["floor_events_per_s"] = floor_rate
    config.shared["gateway_disk_events_per_s"] = gateway_result.events_per_s
    return section

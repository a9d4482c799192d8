"""Added latency per event: paced deltas, receipt minus emission, gateway vs floor."""

from __future__ import annotations

from benchmarks.floor import FloorProcess
from benchmarks.harness import (
    Section,
    Table,
    Target,
    bench_gateway,
    install_agent,
    running,
    scratch,
)
from benchmarks.relay import RelayResult, through_floor, through_gateway, warm, warm_floor
from benchmarks.settings import RunConfig

MEASURES = (
    "The agent emits deltas on a fixed schedule (100, 1,000 and 10,000 per second), stamping "
    "each with CLOCK_MONOTONIC as it writes it; one SSE client subtracts the stamp from its "
    "own CLOCK_MONOTONIC reading when the read that completed the event returns. Added latency "
    "is the gateway's percentile minus the floor's at the same rate. `agent rate` is the rate "
    "the agent really achieved (a relay that reads slowly holds the agent up on a full pipe). "
    "The gateway rows measure the relay itself, every delta its own event "
    "(`server.coalesce_deltas_ms = 0`); with the default, a delta that follows another within "
    "16 ms waits for the window by design (one row at 1,000/s shows it)."
)


def row(name: str, rate: int, result: RelayResult) -> dict[str, object]:
    return {
        "relay": name,
        "target rate/s": rate,
        "agent rate/s": result.agent_rate,
        "events": result.delivered,
        "p50 ms": result.latency_ms(50),
        "p99 ms": result.latency_ms(99),
        "max ms": result.latency_ms(100),
        "relay CPU (cores)": result.cpu.core_share,
    }


async def run(config: RunConfig) -> Section:
    seconds = {100: config.pick(quick=1, full=5), 1000: config.pick(quick=1, full=5)}
    seconds[10000] = config.pick(quick=1, full=2)
    section = Section(name="latency", title="2. Added latency per event", measures=MEASURES)
    floors: dict[int, RelayResult] = {}
    gateways: dict[int, RelayResult] = {}
    with scratch("floor") as base:
        async with FloorProcess(install_agent(base)) as floor:
            await warm_floor(floor)
            for rate, duration in seconds.items():
                floors[rate] = await through_floor(floor, n=rate * duration, rate=rate)
    joined: dict[int, RelayResult] = {}
    for window_ms, results in ((0.0, gateways), (None, joined)):
        overrides = {} if window_ms is None else {"server": {"coalesce_deltas_ms": window_ms}}
        with scratch("latency") as base:
            async with running(bench_gateway(base, **overrides)) as api:
                session = await api.create_session()
                await warm(api, session)
                for rate, duration in seconds.items():
                    if window_ms is None and rate != 1000:
                        continue
                    n = rate * duration
                    results[rate] = await through_gateway(
                        api, session, n=n, rate=rate, limit_s=config.timeout(n)
                    )
    rows: list[dict[str, object]] = []
    for rate in seconds:
        rows += [row("floor", rate, floors[rate]), row("gateway", rate, gateways[rate])]
        if rate in joined:
            rows.append(row("gateway, deltas joined (default 16 ms)", rate, joined[rate]))
    section.tables.append(Table(title="one SSE client, paced deltas", rows=rows))
    added = [
        {
            "target rate/s": rate,
            "added p50 ms": round(gateways[rate].latency_ms(50) - floors[rate].latency_ms(50), 3),
            "added p99 ms": round(gateways[rate].latency_ms(99) - floors[rate].latency_ms(99), 3),
        }
        for rate in seconds
    ]
    section.tables.append(Table(title="added by the gateway (gateway - floor)", rows=added))
    at_1k = added[1]
    p50, p99 = float(str(at_1k["added p50 ms"])), float(str(at_1k["added p99 ms"]))
    section.targets += [
        Target(
            name="added latency p50 at 1,000 events/s",
            goal="<= 1 ms",
            value=f"{p50} ms",
            met=p50 <= 1,
        ),
        Target(
            name="added latency p99 at 1,000 events/s",
            goal="<= 5 ms",
            value=f"{p99} ms",
            met=p99 <= 5,
        ),
    ]
    config.shared["latency"] = added
    return section

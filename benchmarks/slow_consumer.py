"""Slow consumer: one subscriber reading 1 KB/s next to 100 normal ones."""

from __future__ import annotations

from benchmarks.harness import AUTH, Section, Table, Target, bench_gateway, running, scratch
from benchmarks.relay import RelayResult, through_gateway, warm
from benchmarks.settings import RunConfig
from benchmarks.streams import SseStream, Stamps, events_path

MEASURES = (
    "One session, deltas paced at 100/s, 100 normal SSE subscribers; run once alone and once "
    "with a 101st subscriber whose socket receive buffer is 4 KiB and which reads 1 KiB at a "
    "time at 1 KiB/s (it falls behind at once; with the default "
    "`server.subscriber_queue_size` of 1000 its queue overflows after about 10 s and it is "
    "switched to reading from the store; the quick run is too short for that). Reported: "
    "what the 100 others receive, their delivery latency, and the gateway's CPU."
)


def row(name: str, result: RelayResult, slow: Stamps | None) -> dict[str, object]:
    return {
        "run": name,
        "deliveries (100 subscribers)": result.delivered,
        "deliveries/s": result.events_per_s,
        "p50 ms": result.latency_ms(50),
        "p99 ms": result.latency_ms(99),
        "gateway CPU (cores)": result.cpu.core_share,
        "slow one received": slow.seen if slow else "-",
    }


async def run(config: RunConfig) -> Section:
    n = 100 * config.pick(quick=3, full=15)
    section = Section(name="slow_consumer", title="9. Slow consumer", measures=MEASURES)
    with scratch("slow") as base:
        async with running(bench_gateway(base)) as api:
            session = await api.create_session()
            await warm(api, session)
            alone = await through_gateway(
                api, session, n=n, rate=100, subscribers=100, limit_s=config.timeout(n * 10)
            )
            slow_stamps = Stamps(n)
            slow = SseStream(
                api.port,
                events_path(session, await api.last_seq(session)),
                slow_stamps,
                headers=AUTH,
                read_size=1024,
                bytes_per_s=1024,
            )
            await slow.open(rcvbuf=4096)
            try:
                beside = await through_gateway(
                    api,
                    session,
                    n=n,
                    rate=100,
                    subscribers=100,
                    limit_s=config.timeout(n * 10),
                    extra=[slow],
                )
            finally:
                await slow.aclose()
    section.tables.append(
        Table(
            title=f"{n} deltas at 100/s",
            rows=[row("100 subscribers", alone, None), row("100 + one slow", beside, slow_stamps)],
        )
    )
    p99_alone, p99_beside = alone.latency_ms(99), beside.latency_ms(99)
    cost = round((p99_beside - p99_alone) / p99_alone * 100, 1) if p99_alone else float("nan")
    lost = alone.delivered - beside.delivered
    section.targets.append(
        Target(
            name="cost of one slow consumer to the others",
            goal="<= 10 % (p99 latency, deliveries)",
            value=f"p99 {p99_alone} → {p99_beside} ms ({cost:+} %), {lost} deliveries fewer",
            met=cost <= 10 and lost <= 0,
        )
    )
    return section

"""Replay: a client reconnecting 10,000 events behind, served from the store."""

from __future__ import annotations

import time

from benchmarks.harness import AUTH, Section, Table, Target, bench_gateway, running, scratch
from benchmarks.relay import through_gateway, warm
from benchmarks.settings import RunConfig
from benchmarks.streams import SseStream, Stamps, WsStream, events_path

MEASURES = (
    "A session's turn stores N deltas; then a new client connects with `Last-Event-ID` (SSE), "
    "`?after=` (WebSocket) or pages of `?after=&limit=1000` (JSON) set just before the first "
    "delta, and reads until the last one. Events/s = N / (last receipt - connect). No agent is "
    "running meanwhile: everything comes from the SQLite file (on the disk)."
)


async def run(config: RunConfig) -> Section:
    n = config.pick(quick=2000, full=10000)
    section = Section(name="replay", title="8. Replay", measures=MEASURES)
    rows: list[dict[str, object]] = []
    with scratch("replay") as base:
        # Every delta its own event, as the floor sends each line (joining is measured in
        # the throughput and coalescing benchmarks).
        async with running(bench_gateway(base, server={"coalesce_deltas_ms": 0})) as api:
            session = await api.create_session()
            await warm(api, session)
            before = await api.last_seq(session)
            await through_gateway(api, session, n=n, limit_s=config.timeout(n))
            # The turn's first events (turn.started, …) precede the deltas: start at the seq
            # after the warm-up turn, so the client is (n + a few) events behind.
            behind = await api.last_seq(session) - before
            for transport in ("sse", "ws"):
                stamps = Stamps(n)
                start = time.monotonic_ns()
                stream = (
                    SseStream(api.port, events_path(session, before), stamps, headers=AUTH)
                    if transport == "sse"
                    else WsStream(api.port, session, before, stamps)
                )
                await stream.open()
                await stream.run()
                await stream.aclose()
                seconds = (max(stamps.received) - start) / 1e9
                rows.append(
                    {
                        "transport": transport,
                        "events behind": behind,
                        "deltas received": stamps.seen,
                        "events/s": round(behind / seconds, 1),
                    }
                )
            start = time.monotonic_ns()
            after, fetched = before, 0
            while fetched < behind:
                response = await api.http.get(
                    f"/v1/sessions/{session}/events", params={"after": after, "limit": 1000}
                )
                response.raise_for_status()
                page = response.json()
                if not page["events"]:
                    break
                fetched += len(page["events"])
                after = page["next_after"]
            seconds = (time.monotonic_ns() - start) / 1e9
            rows.append(
                {
                    "transport": "json pages of 1000",
                    "events behind": behind,
                    "deltas received": fetched,
                    "events/s": round(fetched / seconds, 1),
                }
            )
    section.tables.append(Table(title=f"reconnecting {n}+ events behind", rows=rows))
    sse = float(str(rows[0]["events/s"]))
    section.targets.append(
        Target(
            name="replay (SSE)",
            goal=">= 50,000 events/s",
            value=f"{sse:.0f} events/s",
            met=sse >= 50000,
        )
    )
    return section

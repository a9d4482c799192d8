"""Several replicas: delivery to a subscriber on another replica than the one running the
session, and the time from a SIGKILL of that replica to its session's adoption.

Two gateways (the benchmark agent behind each) on a private, durable PostgreSQL and a private
Redis, all on this machine. The session runs on replica A. Delivery: paced deltas, one SSE
client on A (the owner) and, in a second turn, one on B (events come through Redis, backed by
the store); receipt minus the agent's emission stamp, as in the latency benchmark. Throughput:
deltas as fast as they come, read on B. Adoption: a long turn runs on A, a client follows it
on B; A is SIGKILLed; the time until B's stream shows the turn ended (``replica_lost``) is
the lease TTL (``cluster.lease_ttl_s``, 3 s here) plus the adopter's next look (a third of
it) plus the work.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import Api, Section, Table, bench_gateway, running, scratch
from benchmarks.relay import RelayResult, through_gateway, warm
from benchmarks.settings import RunConfig
from tests.dbservers import PostgresServer, RedisServer
from tests.fakes.gateway import FakeGateway
from tests.gateway import CLUSTER_SECRET

LEASE_TTL_S = 3.0
MEASURES = __doc__.split("\n\n", 1)[1].strip() if __doc__ else ""


def replicas(base: Path, url: str, redis_url: str) -> list[FakeGateway]:
    made: list[FakeGateway] = []
    for name in ("gw-a", "gw-b"):
        overrides: dict[str, Any] = {
            "storage": {"url": url},
            "cluster": {
                "redis_url": redis_url,
                "replica_id": name,
                "lease_ttl_s": LEASE_TTL_S,
                "secret": CLUSTER_SECRET,
            },
        }
        if made:
            overrides["workspaces"] = {"roots": [str(made[0].workspace.parent)]}
        gateway = bench_gateway(base / name, **overrides)
        if made:
            gateway.workspace = made[0].workspace
        made.append(gateway)
    return made


def row(where: str, result: RelayResult) -> dict[str, object]:
    return {
        "subscriber on": where,
        "events": result.delivered,
        "events/s": result.events_per_s,
        "p50 ms": result.latency_ms(50),
        "p99 ms": result.latency_ms(99),
    }


async def adoption_s(owner: Api, other: Api, session_id: str) -> float:
    """SIGKILL ``owner`` mid-turn; seconds until ``other``'s stream shows the turn ended."""
    after = await other.last_seq(session_id)
    await owner.start_turn(session_id, "bench n=1000000 rate=100")
    headers = {"Accept": "text/event-stream", "Last-Event-ID": str(after)}
    async with other.http.stream(
        "GET", f"/v1/sessions/{session_id}/events", headers=headers, timeout=60
    ) as stream:
        killed: float | None = None
        async for line in stream.aiter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            if killed is None and event["type"] == "message.delta":
                assert owner.gateway.process is not None
                owner.gateway.process.send_signal(signal.SIGKILL)
                killed = time.monotonic()
            if killed is not None and event["type"] == "turn.failed":
                assert event["data"]["error"]["reason"] == "replica_lost", event
                return round(time.monotonic() - killed, 2)
    raise AssertionError("the stream ended before the turn did")


async def run(config: RunConfig) -> Section:
    section = Section(name="replicas", title="11. Several replicas", measures=MEASURES)
    rate, seconds = 1000, config.pick(quick=1, full=5)
    n = config.pick(quick=2000, full=20000)
    with (
        scratch("replicas") as base,
        PostgresServer(base / "postgres", durable=True) as postgres,
        RedisServer(base / "redis") as redis,
    ):
        url = postgres.create_database("gateway")
        a_gateway, b_gateway = replicas(base, url, redis.url)
        async with running(a_gateway) as a, running(b_gateway) as b:
            session = await a.create_session()
            await warm(a, session)  # A runs the session from now on
            paced = {
                "A (runs the session)": await through_gateway(
                    a, session, n=rate * seconds, rate=rate, limit_s=60
                ),
                "B (through Redis)": await through_gateway(
                    b, session, n=rate * seconds, rate=rate, limit_s=60
                ),
            }
            flat_out = await through_gateway(b, session, n=n, limit_s=config.timeout(n))
            section.tables.append(
                Table(
                    title=f"paced {rate} deltas/s for {seconds} s, one SSE client",
                    rows=[row(where, result) for where, result in paced.items()],
                )
            )
            section.tables.append(
                Table(
                    title=f"{n} deltas as fast as they come, read on B",
                    rows=[row("B (through Redis)", flat_out)],
                )
            )
            took = await adoption_s(a, b, session)
            section.tables.append(
                Table(
                    title="SIGKILL of the replica running a turn",
                    rows=[
                        {
                            "lease TTL s": LEASE_TTL_S,
                            "until the turn ended on the other replica s": took,
                        }
                    ],
                )
            )
            section.notes.append(
                "PostgreSQL (fsync on) and Redis share this machine's cores with both "
                "replicas, the agents and the client."
            )
    return section

"""Two replicas of one cluster, as the several-replica tests start them."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.dbservers import PostgresServer, RedisServer
from tests.fakes.gateway import FakeGateway, fake_gateway_at
from tests.gateway import CLUSTER_SECRET, SseReader
from tests.integration.streams import envelopes, is_end, read_frames, sse_headers, start_turn

LEASE_TTL_S = 3.0
_DATABASES = itertools.count(1)


@contextlib.contextmanager
def two_replicas(
    tmp_path: Path, postgres: PostgresServer, redis_server: RedisServer, **sections: Any
) -> Iterator[dict[str, FakeGateway]]:
    """Replicas gw-a and gw-b (not started) on a fresh database and an empty Redis, sharing
    one workspace root and the CLI's state; ``sections``: more settings for both."""
    redis_server.command("FLUSHALL")
    url = postgres.create_database(f"cluster{next(_DATABASES)}_{tmp_path.name[-12:].lower()}")
    made: dict[str, FakeGateway] = {}
    root: str | None = None
    for name in ("gw-a", "gw-b"):
        overrides: dict[str, Any] = {
            **sections,
            "storage": {"url": url},
            "cluster": {
                "redis_url": redis_server.url,
                "replica_id": name,
                "lease_ttl_s": LEASE_TTL_S,
                "command_timeout_s": 10,
                "secret": CLUSTER_SECRET,
            },
        }
        if root is not None:
            # One workspace, and one CLI state (the fake's threads; Claude Code's config
            # directory on a shared volume) and one store of workspace records, as replicas
            # of one deployment have.
            overrides["workspaces"] = {"roots": [root]}
            overrides["snapshots"] = {"dir": str(made["gw-a"].data_dir / "snapshots")}
            overrides["claude_code"] = {"env": {"FAKE_CLAUDE_LOG": str(made["gw-a"].spawn_log)}}
        gateway = fake_gateway_at(tmp_path / name, **overrides)
        if root is None:
            root = str(gateway.workspace.parent)
        else:
            gateway.workspace = made["gw-a"].workspace
            gateway.spawn_log = made["gw-a"].spawn_log
        made[name] = gateway
    try:
        yield made
    finally:
        for gateway in made.values():
            gateway.stop()


def first_turn_on(client: httpx.Client, sid: str) -> int:
    """Run a turn on the replica ``client`` talks to, which holds the session from then on;
    the seq of the turn's last event."""
    start_turn(client, sid, "hi")
    with client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(0)) as r:
        ended = envelopes(read_frames(SseReader(r), is_end))
    seq: int = ended[-1]["seq"]
    return seq

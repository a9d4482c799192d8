"""Commands forwarded between replicas through a real Redis: answered whatever they take,
errors arriving as the same error, and a replica that does not answer reported as such."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.cluster.redis import connect
from app.errors import ClusterUnavailable, TurnInProgress
from app.runtime.cluster import Cluster
from app.settings import ClusterSettings
from app.store.repository import Store
from tests.dbservers import RedisServer


def settings(redis_server: RedisServer, name: str, **values: Any) -> ClusterSettings:
    return ClusterSettings(redis_url=redis_server.url, replica_id=name, **values)


@pytest.fixture
async def pair(redis_server: RedisServer, store: Store) -> AsyncIterator[list[Cluster]]:
    """Replica gw-a, serving commands with ``serve`` below, and gw-b, whose client reads
    time out after 0.5 s (shorter than the commands it waits for)."""
    a = Cluster(connect(redis_server.url), settings(redis_server, "gw-a"), store)
    b = Cluster(
        connect(redis_server.url, timeout_s=0.5),
        settings(redis_server, "gw-b", command_timeout_s=3),
        store,
    )
    await a.redis.flushdb()

    async def serve(op: str, args: dict[str, Any]) -> Any:
        if op == "slow":
            await asyncio.sleep(args["seconds"])
            return {"slept": args["seconds"]}
        raise TurnInProgress("session s1 is already running turn t1", turn_id="t1")

    async def nothing(session_id: str) -> None:
        return None

    async def adopt_none() -> int:
        return 0

    a.start(serve, nothing, adopt_none)
    yield [a, b]
    await a.aclose()
    await b.aclose()


async def test_a_command_slower_than_a_redis_read_deadline_is_answered(
    pair: list[Cluster],
) -> None:
    _, b = pair
    assert await b.forward("gw-a", "slow", {"seconds": 1.5}) == {"slept": 1.5}


async def test_an_error_on_the_owner_arrives_as_the_same_error(pair: list[Cluster]) -> None:
    _, b = pair
    with pytest.raises(TurnInProgress) as raised:
        await b.forward("gw-a", "start_turn", {})
    assert raised.value.status == 409
    assert raised.value.detail == "session s1 is already running turn t1"
    assert raised.value.fields == {"turn_id": "t1"}


async def test_a_replica_that_does_not_answer_is_cluster_unavailable(pair: list[Cluster]) -> None:
    _, b = pair
    with pytest.raises(ClusterUnavailable, match="gw-gone"):
        await b.forward("gw-gone", "slow", {"seconds": 0})

"""Rate limits shared by replicas through a real Redis: counted once, whatever replica a
request reaches."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from app.cluster.buckets import SharedBuckets
from app.cluster.redis import connect
from tests.dbservers import RedisServer


@pytest.fixture
async def replicas(redis_server: RedisServer) -> AsyncIterator[list[Redis]]:
    """Three replicas' own connections to the one Redis (emptied first)."""
    clients = [connect(redis_server.url, timeout_s=2) for _ in range(3)]
    redis_server.command("FLUSHALL")  # the gateway's own user may not
    yield clients
    for client in clients:
        await client.aclose()


async def test_a_burst_spread_over_replicas_gets_exactly_the_capacity(
    replicas: list[Redis],
) -> None:
    buckets = [SharedBuckets(r, name="creates", capacity=10, period_s=3600) for r in replicas]
    answers = await asyncio.gather(*(buckets[i % 3].take("key-a") for i in range(30)))
    assert sum(answer is None for answer in answers) == 10  # not 10 per replica
    waits = [answer for answer in answers if answer is not None]
    assert all(0 < wait <= 360 for wait in waits), waits  # one token per 360 s
    assert await buckets[1].take("key-b") is None  # buckets are per key


async def test_wait_s_takes_nothing(replicas: list[Redis]) -> None:
    bucket = SharedBuckets(replicas[0], name="auth", capacity=1, period_s=3600)
    assert await bucket.wait_s("10.0.0.1") is None
    assert await bucket.wait_s("10.0.0.1") is None
    assert await bucket.take("10.0.0.1") is None
    wait = await bucket.wait_s("10.0.0.1")
    assert wait is not None
    assert wait > 3500


async def test_a_token_comes_back_after_its_share_of_the_period(replicas: list[Redis]) -> None:
    a = SharedBuckets(replicas[0], name="creates", capacity=2, period_s=0.4)
    b = SharedBuckets(replicas[1], name="creates", capacity=2, period_s=0.4)
    assert await a.take("k") is None
    assert await b.take("k") is None
    wait = await a.take("k")
    assert wait is not None
    assert 0 < wait <= 0.2
    deadline = time.monotonic() + 5
    while (await b.take("k")) is not None:  # back after about ``wait`` on Redis's clock
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)

"""Live events across replicas through a real Redis, backed by the store (both engines).

An owner stores each batch, then publishes it; a follower on another replica (its own Redis
connection) subscribes, replays the store, then follows the tail. Whatever the timing and
whatever pub/sub loses, the follower sees every event once, in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest
from redis.asyncio import Redis

from app.cluster.fanout import Fanout, Published, decode, encode
from app.cluster.redis import connect
from app.errors import ClusterUnavailable
from app.events import MessageDelta, encode_event
from app.records import EventRecord
from app.runtime.remote import Page, Pruned, Sequenced, follow
from app.store.repository import Store
from tests.dbservers import RedisServer
from tests.integration.eventlogs import NOW, SESSION

AT = "2026-05-09 12:00:00.000000"


@pytest.fixture
async def owner_redis(redis_server: RedisServer) -> AsyncIterator[Redis]:
    client = connect(redis_server.url, timeout_s=2)
    yield client
    await client.aclose()


@pytest.fixture
async def follower_redis(redis_server: RedisServer) -> AsyncIterator[Redis]:
    client = connect(redis_server.url, timeout_s=2)
    yield client
    await client.aclose()


def record(seq: int) -> EventRecord:
    data = MessageDelta(message_id="m", text=f"delta {seq}\n")
    return EventRecord(
        seq=seq,
        session_id=SESSION,
        turn_id=None,
        attempt=None,
        provider="claude_code",
        at=NOW,
        at_text=AT,
        type=data.TYPE,
        data_json=data.model_dump_json(),
    )


def wire(r: EventRecord) -> str:
    return encode_event(
        seq=r.seq,
        session_id=r.session_id,
        turn_id=r.turn_id,
        attempt=r.attempt,
        provider=r.provider,
        at=r.at_text,
        type=r.type,
        data_json=r.data_json,
    )


class Owner:
    """What the owning replica does with each batch: store it, then publish it (or, to stand
    for a message pub/sub lost, not publish it)."""

    def __init__(self, store: Store, fanout: Fanout) -> None:
        self.store = store
        self.fanout = fanout
        self.seq = 0

    async def append(self, n: int, *, publish: bool = True) -> None:
        records = [record(self.seq + i) for i in range(1, n + 1)]
        self.seq += n
        await self.store.insert_events(records)
        if publish:
            await self.fanout.publish(SESSION, [(r.seq, wire(r)) for r in records])


async def collect(
    batches: AsyncIterator[list[Sequenced]], upto: int, timeout_s: float = 10
) -> list[int]:
    seen: list[int] = []

    async def read() -> None:
        async for batch in batches:
            assert batch
            for event in batch:
                seen.append(event.seq)
                assert event.json.startswith(f'{{"seq":{event.seq},')
            if seen[-1] >= upto:
                return

    await asyncio.wait_for(read(), timeout_s)
    return seen


def pages(store: Store) -> Page:
    async def page(after: int, limit: int) -> Sequence[Sequenced]:
        return await store.events_after(SESSION, after=after, limit=limit)

    return page


def test_a_batch_crosses_redis_as_one_message_and_keeps_each_event() -> None:
    events = [(7, wire(record(7))), (8, wire(record(8)))]
    assert decode(encode(events)) == [Published(seq=s, json=j) for s, j in events]


async def test_a_follower_that_joins_mid_stream_sees_every_event_once_in_order(
    store: Store, owner_redis: Redis, follower_redis: Redis
) -> None:
    owner = Owner(store, Fanout(owner_redis))
    await owner.append(120)  # before the follower exists: only in the store

    async def keep_writing() -> None:
        for _ in range(30):
            await owner.append(10)
            await asyncio.sleep(0)

    async with Fanout(follower_redis).tail(SESSION) as tail:
        writer = asyncio.create_task(keep_writing())  # races the replay
        seen = await collect(follow(tail, pages(store), after=0, reconcile_s=5), upto=420)
        await writer
    assert seen == list(range(1, 421))


async def test_batches_pub_sub_lost_are_read_from_the_store(
    store: Store, owner_redis: Redis, follower_redis: Redis
) -> None:
    owner = Owner(store, Fanout(owner_redis))
    async with Fanout(follower_redis).tail(SESSION) as tail:
        events = follow(tail, pages(store), after=0, reconcile_s=5)
        await owner.append(5)
        assert await collect(events, upto=5) == [1, 2, 3, 4, 5]
        await owner.append(5, publish=False)  # lost
        await owner.append(5)  # reveals the gap
        assert await collect(events, upto=15) == list(range(6, 16))


async def test_a_lost_last_batch_is_found_when_the_tail_stays_quiet(
    store: Store, owner_redis: Redis, follower_redis: Redis
) -> None:
    owner = Owner(store, Fanout(owner_redis))
    async with Fanout(follower_redis).tail(SESSION) as tail:
        events = follow(tail, pages(store), after=0, reconcile_s=0.2)
        await owner.append(3)
        assert await collect(events, upto=3) == [1, 2, 3]
        await owner.append(4, publish=False)  # lost, and nothing follows it
        assert await collect(events, upto=7, timeout_s=5) == [4, 5, 6, 7]


async def test_a_cursor_before_the_oldest_kept_event_is_reported(
    store: Store, owner_redis: Redis, follower_redis: Redis
) -> None:
    owner = Owner(store, Fanout(owner_redis))
    await owner.append(10)
    await store.insert_events([], prune_through={SESSION: 4})
    await store.insert_events([record(11)], prune_through={SESSION: 4})
    async with Fanout(follower_redis).tail(SESSION) as tail:
        with pytest.raises(Pruned) as raised:
            await collect(follow(tail, pages(store), after=2), upto=11)
    assert raised.value.first_seq == 5


async def test_publishing_without_redis_is_cluster_unavailable(
    owner_redis: Redis, redis_server: RedisServer
) -> None:
    redis_server.stop()
    try:
        with pytest.raises(ClusterUnavailable):
            await Fanout(owner_redis).publish(SESSION, [(1, wire(record(1)))])
    finally:
        redis_server.start()
    assert await Fanout(owner_redis).publish(SESSION, [(1, wire(record(1)))]) == 0

"""Session ownership leases in a real Redis, and their fencing tokens in the store.

A lease is exclusive, expires unless its holder renews it, and can be renewed and released
only by its holder; the store hands out a greater fencing token with every claim of a session
and refuses events written under an older one, on both engines.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from redis.asyncio import Redis

from app.cluster.leases import Holder, Lease, Leases
from app.cluster.redis import connect
from app.errors import ClusterUnavailable, SessionFenced
from app.events import MessageDelta
from app.records import EventRecord
from app.store.repository import Store
from tests.dbservers import RedisServer
from tests.integration.eventlogs import NOW, OTHER, SESSION

TTL_S = 0.5


@pytest.fixture
async def redis(redis_server: RedisServer) -> AsyncIterator[Redis]:
    client = connect(redis_server.url, timeout_s=2)
    redis_server.command("FLUSHALL")  # the gateway's own user may not
    yield client
    await client.aclose()


def replica(redis: Redis, name: str) -> Leases:
    return Leases(redis, replica_id=name, ttl_s=TTL_S)


async def eventually(condition: Callable[[], Awaitable[bool]], *, timeout_s: float = 5) -> None:
    """Poll ``condition`` (state in Redis) until it holds; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not await condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {condition}"
        await asyncio.sleep(0.02)


async def test_a_lease_is_exclusive_and_names_its_holder(redis: Redis) -> None:
    a, b = replica(redis, "gw-a"), replica(redis, "gw-b")
    lease = await a.acquire("s1")
    assert isinstance(lease, Lease)
    assert lease.replica_id == "gw-a"
    holder = Holder(replica_id="gw-a", nonce=lease.nonce)
    assert await b.acquire("s1") == holder
    assert await a.acquire("s1") == holder  # no second lease
    assert await b.holder("s1") == holder
    assert await b.holder("s2") is None
    assert isinstance(await b.acquire("s2"), Lease)  # leases are per session


async def test_a_lease_not_renewed_expires_and_another_replica_takes_the_session(
    redis: Redis,
) -> None:
    a, b = replica(redis, "gw-a"), replica(redis, "gw-b")
    first = await a.acquire("s1")
    assert isinstance(first, Lease)

    async def free() -> bool:
        return await b.holder("s1") is None

    await eventually(free)
    second = await b.acquire("s1")
    assert isinstance(second, Lease)
    assert not await a.renew(first)  # the old holder learns it lost the session
    assert not await a.release(first)  # and cannot take it from the new one
    assert await b.holder("s1") == Holder(replica_id="gw-b", nonce=second.nonce)


async def test_renewing_keeps_a_lease_past_its_ttl(redis: Redis) -> None:
    a, b = replica(redis, "gw-a"), replica(redis, "gw-b")
    lease = await a.acquire("s1")
    assert isinstance(lease, Lease)
    started = time.monotonic()
    while time.monotonic() - started < 3 * TTL_S:
        assert await a.renew(lease)
        assert await b.acquire("s1") == Holder(replica_id="gw-a", nonce=lease.nonce)
        await asyncio.sleep(TTL_S / 4)  # the holder's renewal period, well inside the TTL


async def test_only_the_holder_releases_and_a_released_session_is_free_at_once(
    redis: Redis,
) -> None:
    a, b = replica(redis, "gw-a"), replica(redis, "gw-b")
    lease = await a.acquire("s1")
    assert isinstance(lease, Lease)
    impostor = Lease(session_id="s1", replica_id="gw-b", nonce=lease.nonce)
    assert not await b.release(impostor)
    assert await a.release(lease)
    assert isinstance(await b.acquire("s1"), Lease)


async def test_a_restarted_replica_takes_over_the_lease_its_earlier_run_left(
    redis: Redis,
) -> None:
    before, after = replica(redis, "gw-a"), replica(redis, "gw-a")
    left = await before.acquire("s1")
    assert isinstance(left, Lease)
    found = await after.acquire("s1")
    assert found == Holder(replica_id="gw-a", nonce=left.nonce)
    taken = await after.take_over("s1", found)
    assert isinstance(taken, Lease)
    assert taken.nonce != left.nonce
    assert not await before.renew(left)
    assert await after.take_over("s1", found) == Holder(replica_id="gw-a", nonce=taken.nonce)


async def test_many_replicas_racing_for_one_session_get_one_lease(redis: Redis) -> None:
    replicas = [replica(redis, f"gw-{n}") for n in range(20)]
    results = await asyncio.gather(*(r.acquire("s1") for r in replicas))
    leases = [r for r in results if isinstance(r, Lease)]
    assert len(leases) == 1
    assert {r for r in results if isinstance(r, Holder)} == {
        Holder(replica_id=leases[0].replica_id, nonce=leases[0].nonce)
    }


async def test_a_redis_that_is_gone_is_cluster_unavailable_until_it_is_back(
    redis: Redis, redis_server: RedisServer
) -> None:
    a = replica(redis, "gw-a")
    redis_server.stop()
    try:
        for call in (a.acquire("s1"), a.holder("s1")):
            with pytest.raises(ClusterUnavailable) as raised:
                await call
            assert raised.value.status == 503
            assert raised.value.retry_after_s is not None
    finally:
        redis_server.start()
    assert isinstance(await a.acquire("s1"), Lease)  # the client reconnects on its own


def test_a_replica_id_must_be_one_word(redis: Redis) -> None:
    for bad in ("", "gw 1"):
        with pytest.raises(ValueError, match="non-empty word"):
            Leases(redis, replica_id=bad, ttl_s=1)


# --- fencing in the store (both engines) -------------------------------------------------------


def event(session_id: str, seq: int) -> EventRecord:
    data = MessageDelta(message_id="m", text=f"{seq}")
    return EventRecord(
        seq=seq,
        session_id=session_id,
        turn_id=None,
        attempt=None,
        provider=None,
        at=NOW,
        at_text="2026-05-09 12:00:00.000000",
        type=data.TYPE,
        data_json=data.model_dump_json(),
    )


async def seqs(store: Store, session_id: str) -> list[int]:
    return [e.seq for e in await store.events_after(session_id, after=0, limit=100)]


async def test_events_under_a_token_older_than_the_newest_claim_are_refused(store: Store) -> None:
    first = await store.claim_session(SESSION)
    assert first is not None
    await store.insert_events([event(SESSION, 1)], fences={SESSION: first})
    second = await store.claim_session(SESSION)  # another replica took the session over
    assert second is not None
    assert second > first
    with pytest.raises(SessionFenced) as raised:
        await store.insert_events([event(SESSION, 2)], fences={SESSION: first})
    assert raised.value.session_ids == [SESSION]
    assert await seqs(store, SESSION) == [1]
    assert await store.last_event_seq(SESSION) == 1
    await store.insert_events([event(SESSION, 2)], fences={SESSION: second})
    assert await seqs(store, SESSION) == [1, 2]
    with pytest.raises(SessionFenced):  # a writer that never held it
        await store.insert_events([event(SESSION, 3)], fences={SESSION: 0})


async def test_a_fenced_session_fails_its_whole_batch_and_writes_nothing(store: Store) -> None:
    old = await store.claim_session(SESSION)
    current = await store.claim_session(SESSION)
    other = await store.claim_session(OTHER)
    assert old is not None
    assert current is not None
    assert other is not None
    with pytest.raises(SessionFenced):
        await store.insert_events(
            [event(OTHER, 1), event(SESSION, 1)], fences={OTHER: other, SESSION: old}
        )
    assert await seqs(store, OTHER) == []
    assert await seqs(store, SESSION) == []


async def test_claiming_a_session_that_does_not_exist_gives_no_token(store: Store) -> None:
    assert await store.claim_session("no-such-session") is None

"""Subscriptions to the event log on a real, migrated SQLite file: replay then live events,
close, heartbeats and bookkeeping, pruning, eviction, caps and shutdown."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import TypeAdapter

from app.errors import AtCapacity, TooManyRequests, Unavailable
from app.events import Event
from app.runtime.delivery import Delivery
from app.runtime.eventlog import EventLog
from app.runtime.subscription import (
    Degraded,
    Evicted,
    LoggedEvent,
    Recovered,
    ResyncRequired,
    ShuttingDown,
    StreamItem,
    Subscription,
)
from app.store.repository import Store
from app.store.retention import cleanup
from tests.integration.eventlogs import (
    NOW,
    OTHER,
    SESSION,
    append_many,
    delta,
    drain,
    items,
    store_directly,
    subscribe,
    take,
    until,
)

EVENT = TypeAdapter(Event)


# --- subscriptions ----------------------------------------------------------------------------


async def test_subscribe_replays_stored_events_after_the_cursor_then_follows_live_ones(
    log: EventLog,
) -> None:
    await append_many(log, 5)
    subscription = subscribe(log, after=2)
    assert await take(subscription, 3) == [3, 4, 5]
    waiting = asyncio.ensure_future(take(subscription, 2))
    await until(lambda: log.subscriber_count(SESSION) == 1)
    await append_many(log, 2)
    assert await waiting == [6, 7]
    await log.close(SESSION)
    assert await drain(subscription) == []


async def test_subscribing_past_the_last_event_yields_only_new_ones(log: EventLog) -> None:
    await append_many(log, 3)
    subscription = subscribe(log, after=3)
    waiting = asyncio.ensure_future(take(subscription, 1))
    await until(lambda: log.subscriber_count(SESSION) == 1)
    await log.append(SESSION, delta(3))
    assert await waiting == [4]
    await subscription.aclose()


@pytest.mark.parametrize("paused_after", [1, 500, 1000])
async def test_events_appended_while_a_subscriber_replays_arrive_once_in_order(
    log: EventLog, store: Store, paused_after: int
) -> None:
    """The subscriber stops mid-replay (inside a page, at a page's end, at the store's end)."""
    await store_directly(store, 1000)
    subscription = subscribe(log)
    seqs = await take(subscription, paused_after)
    await asyncio.gather(*(log.append(SESSION, delta(i)) for i in range(1000, 1100)))
    await log.close(SESSION)
    seqs += await drain(subscription)
    assert seqs == list(range(1, 1101))


async def test_a_subscriber_and_concurrent_appenders_see_every_event_once_in_order(
    log: EventLog, store: Store
) -> None:
    await store_directly(store, 1000)
    subscription = subscribe(log)
    received: list[int] = []
    replaying = asyncio.Event()

    async def consume() -> None:
        async for event in subscription:
            assert event is not None
            received.append(event.seq)
            replaying.set()

    async def produce() -> None:
        await replaying.wait()
        await asyncio.gather(*(log.append(SESSION, delta(i)) for i in range(1000, 1100)))
        await log.close(SESSION)

    async with asyncio.timeout(20):
        await asyncio.gather(consume(), produce())
    assert received == list(range(1, 1101))


@pytest.mark.parametrize(("stalled_in", "behind"), [("replay", 500), ("live", 100)])
async def test_a_subscriber_that_falls_a_queue_behind_catches_up_from_the_store(
    store: Store, stalled_in: str, behind: int
) -> None:
    log = EventLog(store, queue_size=10)
    subscription = subscribe(log)
    if stalled_in == "replay":
        await log.append(SESSION, delta(0))
        assert await take(subscription, 1) == [1]  # suspended inside the replay of page one
    else:
        waiting = asyncio.ensure_future(take(subscription, 1))
        await until(lambda: log.subscriber_count(SESSION) == 1)
        await log.append(SESSION, delta(0))
        assert await waiting == [1]  # suspended after a live event

    async with asyncio.timeout(20):  # nobody reads: appending must not wait for the subscriber
        await append_many(log, behind)
    assert await log.last_seq(SESSION) == behind + 1

    assert await take(subscription, behind) == list(range(2, behind + 2))
    waiting = asyncio.ensure_future(take(subscription, 1))  # live again after catching up
    await log.append(SESSION, delta(behind + 1))
    assert await waiting == [behind + 2]
    await log.close(SESSION)
    assert await drain(subscription) == []
    assert log.subscriber_count() == 0


async def test_batches_hand_over_a_replayed_page_and_whatever_queued_meanwhile_at_once(
    log: EventLog,
) -> None:
    await append_many(log, 7)
    subscription = await log.open(SESSION, after=2)
    batches = subscription.batches()
    async with asyncio.timeout(10):
        first = await anext(batches)
        assert [item.seq for item in first if isinstance(item, LoggedEvent)] == [3, 4, 5, 6, 7]
        await append_many(log, 4)  # stored and queued while the reader is away
        queued = await anext(batches)
        assert [item.seq for item in queued if isinstance(item, LoggedEvent)] == [8, 9, 10, 11]
        waiting = asyncio.ensure_future(anext(batches))
        await log.append(SESSION, delta(12))
        assert [item.seq for item in await waiting if isinstance(item, LoggedEvent)] == [12]
    await subscription.aclose()
    assert log.subscriber_count() == 0


async def test_one_slow_subscriber_does_not_hold_back_another(store: Store) -> None:
    log = EventLog(store, queue_size=10)
    slow, fast = subscribe(log), subscribe(log)
    await log.append(SESSION, delta(0))
    assert await take(slow, 1) == [1]
    assert await take(fast, 1) == [1]
    for i in range(1, 50):
        await log.append(SESSION, delta(i))
        assert await take(fast, 1) == [i + 1]
    await log.close(SESSION)
    assert await drain(slow) == list(range(2, 51))
    assert await drain(fast) == []


# --- close ------------------------------------------------------------------------------------


async def test_close_ends_a_waiting_subscription(log: EventLog) -> None:
    await append_many(log, 2)
    subscription = subscribe(log)
    ended = asyncio.ensure_future(drain(subscription))
    await until(lambda: log.subscriber_count(SESSION) == 1)
    await log.close(SESSION)
    assert await ended == [1, 2]
    assert log.subscriber_count(SESSION) == 0


async def test_close_ends_a_subscription_only_after_its_last_event(log: EventLog) -> None:
    subscription = subscribe(log)
    await log.append(SESSION, delta(0))
    assert await take(subscription, 1) == [1]
    await append_many(log, 3)  # queued for the subscriber, not yet read
    await log.close(SESSION)
    assert await drain(subscription) == [2, 3, 4]


async def test_close_with_a_full_queue_still_delivers_everything(store: Store) -> None:
    log = EventLog(store, queue_size=10)
    subscription = subscribe(log)
    await log.append(SESSION, delta(0))
    assert await take(subscription, 1) == [1]
    await append_many(log, 10)  # fills the queue exactly: close() finds no room for its marker
    await log.close(SESSION)
    assert await drain(subscription) == list(range(2, 12))


async def test_a_subscription_opened_after_close_replays_and_ends(log: EventLog) -> None:
    await append_many(log, 3)
    await log.close(SESSION)
    assert await drain(subscribe(log)) == [1, 2, 3]
    assert await drain(subscribe(log, after=2)) == [3]
    assert await drain(subscribe(log, after=3)) == []
    assert log.subscriber_count() == 0


async def test_closing_one_session_leaves_the_other_open(log: EventLog) -> None:
    await log.close(SESSION)
    other = subscribe(log, OTHER)
    waiting = asyncio.ensure_future(take(other, 1))
    await until(lambda: log.subscriber_count(OTHER) == 1)
    await log.append(OTHER, delta(0))
    assert await waiting == [1]
    await other.aclose()


# --- heartbeats and bookkeeping ---------------------------------------------------------------


async def test_an_idle_subscription_yields_none_as_a_heartbeat(log: EventLog) -> None:
    subscription = subscribe(log, heartbeat_s=0.05)
    async with asyncio.timeout(5):
        assert await anext(subscription) is None
        assert await anext(subscription) is None
        await log.append(SESSION, delta(0))
        event = await anext(subscription)
    assert event is not None
    assert event.seq == 1
    await log.close(SESSION)
    assert await drain(subscription) == []


async def test_subscriber_count_returns_to_zero_when_subscriptions_end(log: EventLog) -> None:
    assert log.subscriber_count() == 0
    first, second = subscribe(log), subscribe(log)
    other = subscribe(log, OTHER)
    await log.append(SESSION, delta(0))
    await log.append(OTHER, delta(0))
    assert await take(first, 1) == await take(second, 1) == await take(other, 1) == [1]
    assert (log.subscriber_count(SESSION), log.subscriber_count(OTHER)) == (2, 1)
    assert log.subscriber_count() == 3

    await first.aclose()  # a client that went away
    assert log.subscriber_count(SESSION) == 1
    await second.aclose()
    assert log.subscriber_count(SESSION) == 0

    # A handler task cancelled while it waits: once it has had a heartbeat, its only await is
    # inside the subscription, so the cancellation lands there.
    heartbeat = asyncio.Event()

    async def handler() -> None:
        async for event in subscribe(log, after=1, heartbeat_s=0.01):
            assert event is None
            heartbeat.set()

    task = asyncio.ensure_future(handler())
    async with asyncio.timeout(5):
        await heartbeat.wait()
    assert log.subscriber_count(SESSION) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert log.subscriber_count(SESSION) == 0

    await log.close(OTHER)  # a subscription that ends with its session
    assert await drain(other) == []
    assert log.subscriber_count() == 0
    assert log.subscriber_count("no-such-session") == 0


# --- pruning, eviction, caps and shutdown ------------------------------------------------------


async def test_appends_prune_a_session_past_its_cap_in_batches(store: Store) -> None:
    log = EventLog(store, max_events_per_session=100)
    await append_many(log, 250)
    stored = await log.page(SESSION, after=0, limit=1000)
    assert stored[-1].seq == 250
    assert 100 <= len(stored) < 110
    assert [e.seq for e in stored] == list(range(stored[0].seq, 251))
    assert await store.event_bounds(SESSION) == (stored[0].seq, 250)
    # A new log (a restarted gateway) continues numbering and pruning from the store.
    again = EventLog(store, max_events_per_session=100)
    assert (await again.append(SESSION, delta(0))).seq == 251


async def test_a_subscription_behind_the_kept_events_is_told_and_resumes_at_the_oldest(
    store: Store,
) -> None:
    log = EventLog(store, max_events_per_session=100)
    await append_many(log, 250)
    first = (await log.page(SESSION, after=0, limit=1))[0].seq
    subscription = await log.open(SESSION, after=3)
    got = await items(subscription, 2)
    assert got[0] == ResyncRequired(first_seq=first, after=3)
    assert isinstance(got[1], LoggedEvent)
    assert got[1].seq == first
    subscription.release()
    # The compatibility iterator goes on from the oldest kept event too.
    await log.close(SESSION)
    assert await drain(subscribe(log, after=3)) == list(range(first, 251))


async def test_retention_prunes_every_session_to_its_cap(store: Store) -> None:
    await store_directly(store, 300)
    await store.update_session(SESSION, last_seq=300)
    report = await cleanup(store.engine, retention_days=30, now=NOW, max_events_per_session=100)
    assert report.events_pruned == 200
    assert await store.event_bounds(SESSION) == (201, 300)


async def test_a_subscriber_too_far_behind_is_evicted_and_appends_never_wait(
    store: Store,
) -> None:
    log = EventLog(store, queue_size=10, max_lag_events=100)
    slow = await log.open(SESSION, after=0)
    fast = subscribe(log)
    waiting = asyncio.ensure_future(take(fast, 1))
    await until(lambda: log.subscriber_count(SESSION) == 2)
    await log.append(SESSION, delta(0))
    assert await waiting == [1]
    slow_items = aiter(slow)
    first = await anext(slow_items)
    assert isinstance(first, LoggedEvent)
    assert first.seq == 1
    async with asyncio.timeout(20):  # the slow one reads nothing more; appends go on
        for i in range(1, 150):
            await log.append(SESSION, delta(i))
            assert await take(fast, 1) == [i + 1]
    assert log.subscriber_count(SESSION) == 1  # the slow one no longer counts
    assert await anext(slow_items) == Evicted(last_seq_sent=1, reason="lagging")
    with pytest.raises(StopAsyncIteration):
        await anext(slow_items)
    await log.close(SESSION)
    assert await drain(fast) == []
    assert log.subscriber_count() == 0


async def test_history_older_than_the_subscription_does_not_count_as_lag(store: Store) -> None:
    await store_directly(store, 1000)
    log = EventLog(store, max_lag_events=100)
    subscription = subscribe(log)
    assert await take(subscription, 1000) == list(range(1, 1001))
    await append_many(log, 50)
    assert await take(subscription, 50) == list(range(1001, 1051))
    await subscription.aclose()


async def test_subscriber_caps_refuse_with_retry_after(log: EventLog, store: Store) -> None:
    capped = EventLog(store, max_subscribers_per_session=2, max_subscribers=3)
    first = await capped.open(SESSION, after=0)
    await capped.open(SESSION, after=0)
    with pytest.raises(TooManyRequests) as per_session:
        await capped.open(SESSION, after=0)
    assert per_session.value.retry_after_s
    await capped.open(OTHER, after=0)
    with pytest.raises(AtCapacity) as in_all:
        await capped.open(OTHER, after=0)
    assert in_all.value.retry_after_s
    first.release()
    first.release()  # idempotent
    assert capped.subscriber_count() == 2
    await capped.open(OTHER, after=0)
    assert capped.subscriber_count() == 3


async def test_shutdown_ends_every_subscription_and_refuses_new_ones(log: EventLog) -> None:
    await append_many(log, 2)
    subscription = await log.open(SESSION, after=0)
    got = await items(subscription, 2)
    assert [e.seq for e in got if isinstance(e, LoggedEvent)] == [1, 2]
    waiting = asyncio.ensure_future(items(subscription, 1))
    await asyncio.sleep(0)
    log.shutdown(retry_ms=1234)
    assert await waiting == [ShuttingDown(retry_ms=1234)]
    assert log.subscriber_count() == 0
    with pytest.raises(Unavailable):
        await log.open(SESSION, after=0)


# --- notices (a follower's events no longer, then again, live) --------------------------------


async def test_subscribers_are_told_when_their_events_stop_and_start_coming_live(
    store: Store,
) -> None:
    """As a follower on another replica is: events the owner stored, delivered by the mirror,
    with ``degraded`` and ``recovered`` placed among them in the order they happened."""
    delivery = Delivery(store)
    channel = await delivery.channel(SESSION)

    def opened() -> Subscription:
        return delivery.open(
            channel,
            after=channel.last_seq,
            heartbeat_s=None,
            check_limits=False,
            transport="internal",
            holder=None,
        )

    async def deliver(*seqs: int) -> None:
        await store_directly(store, len(seqs), first=seqs[0])
        page = await delivery.page(SESSION, after=seqs[0] - 1, limit=len(seqs))
        delivery.deliver(channel, page)

    following = opened()
    first = asyncio.ensure_future(items(following, 1))
    await deliver(1)
    assert [item.seq for item in await first if isinstance(item, LoggedEvent)] == [1]
    degraded = Degraded(reason="redis_unreachable", poll_ms=2000)
    delivery.notify(channel, degraded)
    joining = opened()  # opened while degraded: told after what it replays
    await deliver(2, 3)
    delivery.notify(channel, Recovered())
    await deliver(4)

    def shown(got: list[StreamItem]) -> list[object]:
        return [item.seq if isinstance(item, LoggedEvent) else item for item in got]

    assert shown(await items(following, 5)) == [degraded, 2, 3, Recovered(), 4]
    assert shown(await items(joining, 5)) == [degraded, 2, 3, Recovered(), 4]
    newcomer = opened()  # after the recovery: nothing to tell it
    await deliver(5)
    assert shown(await items(newcomer, 1)) == [5]
    for subscription in (following, joining, newcomer):
        await subscription.aclose()

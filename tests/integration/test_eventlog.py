"""The event log on a real, migrated SQLite file: numbering, persistence, replay and fan-out."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from app.errors import AtCapacity, TooManyRequests, Unavailable
from app.events import Event, MessageDelta, MessageDeltaEvent, TurnStarted
from app.runtime.eventlog import EventLog
from app.runtime.subscription import (
    Evicted,
    LoggedEvent,
    ResyncRequired,
    ShuttingDown,
    StreamItem,
)
from app.runtime.subscription import Subscription as Subscription_
from app.store.db import create_engine, session_factory
from app.store.repository import Store
from app.store.retention import cleanup
from app.store.schema import upgrade_async
from app.store.tables import EventRow
from tests.integration.rows import session_row

NOW = datetime(2026, 5, 9, 12, 0, tzinfo=UTC)
SESSION, OTHER = "sess-a", "sess-b"
EVENT = TypeAdapter(Event)

Subscription = AsyncGenerator[LoggedEvent | None, None]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'gateway.db'}"
    await upgrade_async(url)
    engine = create_engine(url)
    store = Store(engine)
    await store.add(session_row(SESSION, at=NOW), session_row(OTHER, at=NOW))
    yield store
    await engine.dispose()


@pytest.fixture
def log(store: Store) -> EventLog:
    return EventLog(store)


def subscribe(
    log: EventLog, session_id: str = SESSION, *, after: int = 0, heartbeat_s: float | None = None
) -> Subscription:
    """``log.subscribe``, typed as the async generator it is, so a test can ``aclose()`` it."""
    subscription = log.subscribe(session_id, after=after, heartbeat_s=heartbeat_s)
    assert isinstance(subscription, AsyncGenerator)
    return subscription


def delta(i: int) -> MessageDelta:
    return MessageDelta(message_id="m", text=str(i))


async def append_many(log: EventLog, count: int) -> None:
    for i in range(count):
        await log.append(SESSION, delta(i))


async def store_directly(store: Store, count: int) -> None:
    """Write ``count`` events in one transaction, as an earlier gateway process would have."""
    async with session_factory(store.engine).begin() as db:
        db.add_all(
            EventRow(
                session_id=SESSION,
                seq=seq,
                at=NOW,
                type="message.delta",
                data=delta(seq).model_dump(mode="json"),
            )
            for seq in range(1, count + 1)
        )


async def take(subscription: Subscription, count: int) -> list[int]:
    """The seqs of the next ``count`` events (heartbeats are not expected here)."""
    seqs = []
    async with asyncio.timeout(10):
        for _ in range(count):
            event = await anext(subscription)
            assert event is not None
            seqs.append(event.seq)
    return seqs


async def drain(subscription: Subscription) -> list[int]:
    """The seqs of every remaining event, until the subscription ends."""
    async with asyncio.timeout(10):
        return [event.seq async for event in subscription if event is not None]


async def until(condition: Callable[[], bool]) -> None:
    """Return once ``condition()`` holds, polling it for at most five seconds."""
    async with asyncio.timeout(5):
        # The log has no event for "a subscriber is registered"; polling it is bounded.
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.001)


# --- numbering and persistence ----------------------------------------------------------------


async def test_append_numbers_from_one_and_stores_each_event_before_returning(
    store: Store,
) -> None:
    clock = iter(NOW + timedelta(seconds=i) for i in range(10))
    log = EventLog(store, clock=lambda: next(clock))

    first = await log.append(SESSION, TurnStarted(prompt="hi"), turn_id="turn-1", attempt=1)
    assert first.seq == 1
    assert [e.seq for e in await log.page(SESSION, after=0, limit=10)] == [1]
    second = await log.append(SESSION, delta(0), turn_id="turn-1", attempt=1, provider="claude")
    assert second.seq == 2
    third = await log.append(SESSION, delta(1))
    assert third.seq == 3

    page = await log.page(SESSION, after=0, limit=10)
    assert [(e.seq, e.type, e.turn_id) for e in page] == [
        (1, "turn.started", "turn-1"),
        (2, "message.delta", "turn-1"),
        (3, "message.delta", None),
    ]
    assert [e.json for e in page] == [first.json, second.json, third.json]
    assert [EVENT.validate_json(e.json).at for e in page] == [
        NOW,
        NOW + timedelta(seconds=1),
        NOW + timedelta(seconds=2),
    ]
    assert await log.last_seq(SESSION) == 3
    row = await store.get_session(SESSION)
    assert row is not None
    assert row.last_seq == 3


async def test_the_wire_form_is_a_valid_event_envelope(log: EventLog) -> None:
    logged = await log.append(SESSION, delta(7), turn_id="t", attempt=2, provider="claude_code")
    event = EVENT.validate_json(logged.json)
    assert isinstance(event, MessageDeltaEvent)
    assert (event.seq, event.session_id, event.turn_id) == (1, SESSION, "t")
    assert (event.attempt, event.provider) == (2, "claude_code")
    assert event.data == delta(7)
    assert event.at.tzinfo is not None
    assert json.loads(logged.json)["at"].endswith("Z")


async def test_the_wire_time_is_utc_with_microseconds_live_and_replayed(store: Store) -> None:
    """Whatever zone the clock reads in, events carry one UTC form; whole seconds keep their
    six zeros, so a replayed event is byte for byte the one published live."""
    times = [datetime(2026, 3, 1, 14, 0, 0, tzinfo=timezone(timedelta(hours=2))), NOW]
    clock = iter(times)
    log = EventLog(store, clock=lambda: next(clock))
    published = [await log.append(SESSION, delta(i)) for i in range(2)]
    assert [json.loads(e.json)["at"] for e in published] == [
        "2026-03-01T12:00:00.000000Z",
        NOW.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    ]
    stored = await log.page(SESSION, after=0, limit=10)
    assert [e.json for e in stored] == [e.json for e in published]


async def test_any_text_reads_back_from_the_store_exactly_as_it_was_published(
    log: EventLog,
) -> None:
    """The payload is stored as the JSON text it was published with and built into the
    envelope again without being decoded: quotes, escapes and any Unicode survive."""
    texts = [
        '"quoted" \\ back',
        "line\nbreak\ttab\r",
        "\u2028\u2029 é 中文 😀",
        "\x00\x1f</script>",
    ]
    published = [
        await log.append(SESSION, MessageDelta(message_id='m"1', text=t), turn_id='t"x')
        for t in texts
    ]
    stored = await log.page(SESSION, after=0, limit=10)
    assert [e.json for e in stored] == [e.json for e in published]
    events = [EVENT.validate_json(e.json) for e in stored]
    assert [e.data.text for e in events if isinstance(e, MessageDeltaEvent)] == texts
    assert {e.turn_id for e in events} == {'t"x'}
    assert all("\n" not in e.json for e in stored)  # one SSE data line each
    assert published[0].sse == f"data: {published[0].json}\nid: 1\n\n".encode()


async def test_events_stored_by_an_earlier_gateway_read_back_as_the_same_events(
    log: EventLog, store: Store
) -> None:
    """Rows written through the ORM (spaced JSON, the previous writer) are valid envelopes."""
    await store_directly(store, 3)
    appended = await log.append(SESSION, delta(4))
    page = await log.page(SESSION, after=0, limit=10)
    assert [e.seq for e in page] == [1, 2, 3, 4]
    events = [EVENT.validate_json(e.json) for e in page]
    assert [e.data for e in events] == [delta(1), delta(2), delta(3), delta(4)]
    assert [e.at for e in events[:3]] == [NOW] * 3
    assert page[-1].json == appended.json


async def test_page_returns_events_after_a_seq_up_to_a_limit(log: EventLog) -> None:
    await append_many(log, 6)
    assert [e.seq for e in await log.page(SESSION, after=2, limit=3)] == [3, 4, 5]
    assert [e.seq for e in await log.page(SESSION, after=5, limit=3)] == [6]
    assert await log.page(SESSION, after=6, limit=3) == []


async def test_two_sessions_are_numbered_independently(log: EventLog) -> None:
    seqs = [
        (await log.append(session_id, delta(i))).seq
        for i, session_id in enumerate([SESSION, OTHER, SESSION, SESSION, OTHER])
    ]
    assert seqs == [1, 1, 2, 3, 2]
    assert [e.seq for e in await log.page(SESSION, after=0, limit=10)] == [1, 2, 3]
    assert [e.seq for e in await log.page(OTHER, after=0, limit=10)] == [1, 2]


async def test_a_new_log_continues_numbering_from_the_store(store: Store) -> None:
    await append_many(EventLog(store), 3)
    assert (await EventLog(store).append(SESSION, delta(3))).seq == 4


async def test_concurrent_appends_get_every_number_once(store: Store) -> None:
    log = EventLog(store)  # fresh: the tasks also race to create the session's channel
    async with asyncio.timeout(30):
        appended = await asyncio.gather(*(log.append(SESSION, delta(i)) for i in range(200)))
    assert sorted(e.seq for e in appended) == list(range(1, 201))
    stored = await log.page(SESSION, after=0, limit=1000)
    assert [e.seq for e in stored] == list(range(1, 201))
    texts = {json.loads(e.json)["data"]["text"] for e in stored}
    assert texts == {str(i) for i in range(200)}


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


async def test_an_append_cancelled_mid_write_still_numbers_its_event(log: EventLog) -> None:
    """A turn cancelled while emitting (session delete) must not leave a seq to reuse."""
    for _ in range(20):  # cancel at different points of the write
        writing = asyncio.create_task(log.append(SESSION, delta(0)))
        await asyncio.sleep(0)  # let the append start its write
        writing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await writing
        after = await log.append(SESSION, delta(1))
        page = await log.page(SESSION, after=0, limit=1000)
        assert [e.seq for e in page] == list(range(1, after.seq + 1))
    # A cancel that lands after numbering still stores the event (only the very first one,
    # while the session's channel is being opened, can land before it): no seq is reused.
    assert after.seq >= 39


async def test_streamed_appends_are_stored_together_and_published_only_once_stored(
    store: Store,
) -> None:
    log = EventLog(store)
    subscription = subscribe(log)
    for i in range(300):  # appended without waiting: they queue while a commit runs
        await log.append(SESSION, delta(i), durable=False)
    last = await log.append(SESSION, TurnStarted(prompt="end"))  # waits for all before it
    assert last.seq == 301
    seen = []
    async for item in subscription:
        assert item is not None
        # Published only once stored: the store already has it when a subscriber gets it.
        assert [e.seq for e in await store.events_after(SESSION, after=item.seq - 1, limit=1)] == [
            item.seq
        ]
        seen.append(item.seq)
        if item.seq == last.seq:
            break
    await subscription.aclose()
    assert seen == list(range(1, 302))
    row = await store.get_session(SESSION)
    assert row is not None
    assert row.last_seq == 301


async def test_a_failed_write_fails_only_its_session_and_its_numbering_resumes(
    store: Store,
) -> None:
    log = EventLog(store)
    ghost = "sess-without-a-row"  # its events violate the events → sessions foreign key
    assert await log.last_seq(ghost) == await log.last_seq(SESSION) == 0
    for i in range(5):  # interleaved, without a pause, so the two sessions share a commit
        await log.append(ghost, delta(i), durable=False)
        await log.append(SESSION, delta(i), durable=False)
    await log.flush()
    assert [e.seq for e in await log.page(SESSION, after=0, limit=10)] == [1, 2, 3, 4, 5]
    assert await log.last_seq(ghost) == 0
    with pytest.raises(
        sqlite3.IntegrityError
    ):  # nobody waited for those writes: the next append says
        await log.append(ghost, delta(9))
    await store.add(session_row(ghost, at=NOW))
    resumed = await log.append(ghost, delta(9))
    assert resumed.seq == 1  # no gap where the failed events were numbered
    assert [e.seq for e in await log.page(ghost, after=0, limit=10)] == [1]


async def test_aclose_stores_what_is_queued(store: Store) -> None:
    log = EventLog(store)
    for i in range(50):
        await log.append(SESSION, delta(i), durable=False)
    await log.aclose()
    assert [e.seq for e in await store.events_after(SESSION, after=0, limit=100)] == list(
        range(1, 51)
    )


# --- pruning, eviction, caps and shutdown ------------------------------------------------------


async def items(subscription: Subscription_, count: int) -> list[StreamItem]:
    """The next ``count`` items of an ``open()`` subscription."""
    got: list[StreamItem] = []
    iterator = aiter(subscription)
    async with asyncio.timeout(10):
        for _ in range(count):
            got.append(await anext(iterator))
    return got


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

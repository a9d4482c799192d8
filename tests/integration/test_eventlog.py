"""The event log on a real, migrated SQLite file: numbering, persistence, and appends that are
cancelled, streamed or fail."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy.exc
from pydantic import TypeAdapter

from app.events import Event, MessageDelta, MessageDeltaEvent, TurnStarted
from app.runtime.eventlog import EventLog
from app.store.repository import Store
from tests.integration.eventlogs import (
    NOW,
    OTHER,
    SESSION,
    append_many,
    delta,
    store_directly,
    subscribe,
)
from tests.integration.rows import session_record

EVENT = TypeAdapter(Event)


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


# --- appends: cancelled, streamed, failed, closed ----------------------------------------------


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
    # Nobody waited for those writes: the next append says (as the engine's driver raised it).
    with pytest.raises((sqlite3.IntegrityError, sqlalchemy.exc.IntegrityError)):
        await log.append(ghost, delta(9))
    await store.create_session(session_record(ghost, at=NOW))
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


async def test_the_store_reads_events_of_some_types_from_the_newest_back(store: Store) -> None:
    log = EventLog(store)
    for n in range(1, 7):
        await log.append(SESSION, TurnStarted(prompt=f"p{n}"), turn_id=f"t{n}")
        await log.append(SESSION, delta(n))
    await log.append(OTHER, TurnStarted(prompt="elsewhere"), turn_id="x")
    newest = await store.events_before(SESSION, before=2**62, types=["turn.started"], limit=4)
    assert [(e.seq, e.turn_id) for e in newest] == [(11, "t6"), (9, "t5"), (7, "t4"), (5, "t3")]
    assert json.loads(newest[0].json)["data"] == {"prompt": "p6"}
    older = await store.events_before(SESSION, before=5, types=["turn.started"], limit=4)
    assert [e.seq for e in older] == [3, 1]
    both = await store.events_before(
        SESSION, before=3, types=["turn.started", "message.delta"], limit=9
    )
    assert [e.seq for e in both] == [2, 1]

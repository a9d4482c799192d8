"""Who runs each session, decided in the store (both engines): claims, heartbeats, fences.

A claim succeeds for a free session, for the replica that holds it, and for a session whose
holder has been silent for the TTL (only when asked to take it over); every claim hands out a
greater fencing token. Events written under an older token are refused, and so is every write
a session's old owner makes after another replica claimed it: turn rows, session status,
approvals, questions, bindings. Nothing of a refused write is kept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.errors import ClusterUnavailable, SessionFenced
from app.events import MessageDelta
from app.records import ApprovalRecord, EventRecord, TurnRecord
from app.store.db import create_engine
from app.store.ownership import Claimed, HeldBy
from app.store.repository import Store
from tests.integration.eventlogs import NOW, OTHER, SESSION
from tests.integration.rows import session_record

LONG = 3600.0
"""A TTL nobody outlives in a test: a replica that sent a heartbeat is alive."""
NOW_STALE = 0.0
"""A TTL everyone has outlived: every replica is silent."""


@pytest.fixture
async def engine(store: Store) -> AsyncEngine:
    return store.engine


@pytest.fixture
async def as_a(engine: AsyncEngine) -> AsyncIterator[Store]:
    """The store as replica gw-a writes it (fenced by its claims)."""
    held = Store(engine, holder="gw-a")
    yield held
    held.close()


@pytest.fixture
async def as_b(database_url: str) -> AsyncIterator[Store]:
    """The store as replica gw-b writes it, on an engine of its own (another process)."""
    engine = create_engine(database_url)
    held = Store(engine, holder="gw-b")
    yield held
    held.close()
    await engine.dispose()


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


async def claim(store: Store, session_id: str, holder: str, *, stale_after_s: float = LONG) -> int:
    got = await store.claim_session(session_id, holder=holder, stale_after_s=stale_after_s)
    assert isinstance(got, Claimed), got
    return got.token


async def test_a_claim_is_exclusive_while_its_holder_sends_heartbeats(store: Store) -> None:
    await store.heartbeat("gw-a")
    first = await claim(store, SESSION, "gw-a")
    assert await store.claim_session(SESSION, holder="gw-b", stale_after_s=LONG) == HeldBy("gw-a")
    assert await claim(store, SESSION, "gw-a") > first  # its holder may claim it again
    assert await claim(store, OTHER, "gw-b") == 1  # claims are per session
    assert await store.holders([SESSION, OTHER]) == {
        SESSION: ("gw-a", first + 1),
        OTHER: ("gw-b", 1),
    }
    assert await store.live_holder(SESSION, stale_after_s=LONG) == "gw-a"
    assert await store.live_holder(OTHER, stale_after_s=LONG) is None  # gw-b never beat
    assert await store.claim_session("no-such-session", holder="gw-a", stale_after_s=LONG) is None


async def test_a_silent_holder_is_taken_over_only_when_asked(store: Store) -> None:
    await store.heartbeat("gw-a")
    await store.heartbeat("gw-b")
    taken = await claim(store, SESSION, "gw-a")
    # gw-a silent for longer than the TTL: not taken unless the claim says so.
    assert await store.claim_session(
        SESSION, holder="gw-b", stale_after_s=NOW_STALE, take_stale=False
    ) == HeldBy("gw-a")
    assert await claim(store, SESSION, "gw-b", stale_after_s=NOW_STALE) == taken + 1
    assert await store.live_replicas(stale_after_s=LONG) == ["gw-a", "gw-b"]
    assert await store.live_replicas(stale_after_s=NOW_STALE) == []


async def test_a_released_session_is_free_and_only_its_holder_releases_it(store: Store) -> None:
    await store.heartbeat("gw-a")
    await claim(store, SESSION, "gw-a")
    await store.release_session(SESSION, holder="gw-b")  # not its holder: nothing happens
    assert (await store.holders([SESSION]))[SESSION][0] == "gw-a"
    await store.release_session(SESSION, holder="gw-a")
    assert (await store.holders([SESSION]))[SESSION][0] is None
    assert await claim(store, SESSION, "gw-b") == 2


async def test_events_under_a_token_older_than_the_newest_claim_are_refused(store: Store) -> None:
    first = await claim(store, SESSION, "gw-a")
    await store.insert_events([event(SESSION, 1)], fences={SESSION: first})
    second = await claim(store, SESSION, "gw-b", stale_after_s=NOW_STALE)
    assert second > first
    with pytest.raises(SessionFenced) as raised:
        await store.insert_events([event(SESSION, 2)], fences={SESSION: first})
    assert raised.value.session_ids == [SESSION]
    assert isinstance(raised.value, ClusterUnavailable)  # a client meeting it retries
    assert await seqs(store, SESSION) == [1]
    assert await store.last_event_seq(SESSION) == 1
    await store.insert_events([event(SESSION, 2)], fences={SESSION: second})
    assert await seqs(store, SESSION) == [1, 2]
    with pytest.raises(SessionFenced):  # a writer that never held it
        await store.insert_events([event(SESSION, 3)], fences={SESSION: 0})


async def test_a_fenced_session_fails_its_whole_batch_and_writes_nothing(store: Store) -> None:
    old = await claim(store, SESSION, "gw-a")
    current = await claim(store, SESSION, "gw-a")
    other = await claim(store, OTHER, "gw-a")
    with pytest.raises(SessionFenced):
        await store.insert_events(
            [event(OTHER, 1), event(SESSION, 1)], fences={OTHER: other, SESSION: old}
        )
    assert current > old
    assert await seqs(store, OTHER) == []
    assert await seqs(store, SESSION) == []


def turn(turn_id: str) -> TurnRecord:
    return TurnRecord(
        id=turn_id,
        session_id=SESSION,
        number=0,
        prompt="hello",
        status="queued",
        provider="claude_code",
        created_at=NOW,
    )


def approval(approval_id: str) -> ApprovalRecord:
    return ApprovalRecord(
        id=approval_id,
        session_id=SESSION,
        turn_id=None,
        provider_request_id="r1",
        tool="Bash",
        input={"command": "ls"},
        options=[],
        status="pending",
        expires_at=NOW + timedelta(minutes=5),
        created_at=NOW,
    )


async def test_every_write_of_an_owner_that_lost_its_session_is_refused_and_kept_out(
    store: Store, as_a: Store, as_b: Store
) -> None:
    await claim(store, SESSION, "gw-a")
    added = await as_a.add_turn(turn("t1"), now=NOW)
    await as_a.create_approval(approval("a1"))
    await as_a.touch_binding(session_id=SESSION, provider="claude_code", thread_id="th", now=NOW)
    await claim(store, SESSION, "gw-b", stale_after_s=NOW_STALE)  # gw-a paused past its TTL

    later = NOW + timedelta(minutes=1)
    refused = [
        as_a.update_session(SESSION, status="idle", updated_at=later),
        as_a.update_turn(added.id, status="failed"),
        as_a.turn_running(added.id, SESSION, now=later, attempts=2),
        as_a.add_turn(turn("t2"), now=later),
        as_a.create_approval(approval("a2")),
        as_a.update_approval("a1", status="expired"),
        as_a.touch_binding(session_id=SESSION, provider="claude_code", thread_id="x", now=later),
    ]
    for write in refused:
        with pytest.raises(SessionFenced):
            await write
    session = await store.get_session(SESSION)
    assert session is not None
    assert (session.status, session.updated_at) == ("running", NOW)
    kept = await store.get_turn(SESSION, added.id)
    assert kept is not None
    assert (kept.status, kept.attempts) == ("queued", 0)
    assert [t.id for t in await store.list_turns(SESSION, limit=10)] == ["t1"]
    assert [a.id for a in await store.list_approvals(SESSION, status=None, limit=10)] == ["a1"]
    assert (await store.get_approval(SESSION, "a1") or approval("x")).status == "pending"
    binding = await store.get_binding(SESSION, "claude_code")
    assert binding is not None
    assert binding.thread_id == "th"

    # The new owner writes as before; a store of one gateway is never fenced.
    await as_b.update_turn(added.id, status="failed")
    await as_b.update_session(SESSION, status="idle", updated_at=later)
    await store.update_session(SESSION, status="idle", updated_at=later)
    assert (await store.get_turn(SESSION, added.id) or replace(added)).status == "failed"


async def test_orphans_are_sessions_of_silent_replicas_of_this_one_and_unfinished_free_ones(
    store: Store,
) -> None:
    await store.create_session(session_record("s-dead", at=NOW))
    await store.create_session(session_record("s-alive", at=NOW))
    await store.create_session(session_record("s-mine", at=NOW))
    await store.create_session(session_record("s-free-busy", at=NOW, status="running"))
    await store.heartbeat("gw-alive")
    await store.heartbeat("gw-me")
    await claim(store, "s-alive", "gw-alive")
    await claim(store, "s-mine", "gw-me")
    await claim(store, "s-dead", "gw-dead")  # never sent a heartbeat
    # SESSION and OTHER: free and idle, not orphans.
    assert await store.orphaned_sessions(me="gw-me", stale_after_s=LONG) == [
        "s-dead",
        "s-free-busy",
        "s-mine",
    ]

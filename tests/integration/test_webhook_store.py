"""The webhook outbox and its deliveries in the store, on SQLite and on PostgreSQL: messages are
written in their events' transaction (or not at all), routing makes one delivery per endpoint,
and a lease gives each due delivery to one holder; on PostgreSQL a claim skips what another
transaction holds instead of waiting for it."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from app.events import TurnCompleted, TurnStarted, stored_time
from app.records import EventRecord
from app.runtime.eventlog import EventLog
from app.store.repository import Store
from app.store.webhookrecords import MessageHead
from app.store.webhookstore import WebhookStore
from app.webhooks.outbox import WebhookOutbox
from tests.integration.eventlogs import NOW, OTHER, SESSION


@pytest.fixture
async def webhooks(store: Store) -> AsyncIterator[WebhookStore]:
    hooks = WebhookStore(store.engine)
    yield hooks
    hooks.close()


def _outbox(*wanted: str) -> WebhookOutbox:
    outbox = WebhookOutbox(wake=lambda: None, metrics=None)
    outbox.wanted = frozenset(wanted)
    return outbox


async def _route_all(
    webhooks: WebhookStore, *endpoints: str, free: dict[str, int] | None = None
) -> list[MessageHead]:
    seen: list[MessageHead] = []

    def choose(head: MessageHead) -> list[str]:
        seen.append(head)
        return list(endpoints) if head.type == "turn.completed" else []

    leased = await webhooks.route(choose, now=NOW, holder="r0", free=free or {}, lease_s=60)
    assert len(leased) == sum((free or {}).values())
    return seen


async def test_messages_are_written_with_their_events_or_not_at_all(
    store: Store, webhooks: WebhookStore
) -> None:
    log = EventLog(store, outbox=_outbox("turn.completed", "session.idle"))
    await log.append(SESSION, TurnStarted(prompt="hi"), turn_id="t1")
    assert await webhooks.backlog() == (0, 0)  # a type nobody wants makes no message
    await log.append(SESSION, TurnCompleted(final_text="done"), turn_id="t1")
    assert await webhooks.backlog() == (2, 0)  # turn.completed and the session.idle after it
    # A batch the store refuses (its seq is taken: another writer numbered it) keeps no
    # message of its events.
    taken = EventRecord(
        seq=2, session_id=SESSION, turn_id="t2", attempt=None, provider=None, at=NOW,
        at_text=stored_time(NOW), type="turn.completed", data_json='{"final_text":"again"}',
    )  # fmt: skip
    messages = _outbox("turn.completed").messages([taken])
    assert len(messages) == 1
    with pytest.raises((IntegrityError, sqlite3.IntegrityError)):
        await store.insert_events([taken], outbox=messages)
    assert await webhooks.backlog() == (2, 0)
    await log.aclose()


async def test_routing_makes_one_delivery_per_endpoint_and_none_for_unwanted_messages(
    store: Store, webhooks: WebhookStore
) -> None:
    await store.update_session(SESSION, owner="alice")
    log = EventLog(store, outbox=_outbox("turn.completed", "turn.started"))
    await log.append(SESSION, TurnStarted(prompt="hi"), turn_id="t1")
    await log.append(SESSION, TurnCompleted(final_text="done"), turn_id="t1")
    await log.append(OTHER, TurnCompleted(final_text="done"), turn_id="t2")
    heads = await _route_all(webhooks, "a", "b")
    assert sorted((h.type, h.session_id, h.owner) for h in heads) == [
        ("turn.completed", SESSION, "alice"),
        ("turn.completed", OTHER, None),
        ("turn.started", SESSION, "alice"),
    ]
    assert await webhooks.backlog() == (0, 4)  # two messages to two endpoints; one dropped
    assert await _route_all(webhooks, "a") == []  # each message is routed once
    assert await webhooks.due_endpoints() == {"a": 2, "b": 2}
    # With a free slot, the router leases a new delivery to itself at once.
    await log.append(OTHER, TurnCompleted(final_text="more"), turn_id="t3")
    await _route_all(webhooks, "a", "b", free={"b": 1})
    assert await webhooks.due_endpoints() == {"a": 3, "b": 2}
    await log.aclose()


async def test_a_lease_gives_each_due_delivery_to_one_holder(
    store: Store, webhooks: WebhookStore
) -> None:
    log = EventLog(store, outbox=_outbox("turn.completed"))
    for session in (SESSION, OTHER):
        await log.append(session, TurnCompleted(final_text="done"))
    await _route_all(webhooks, "a")
    other = WebhookStore(store.engine)
    first = await webhooks.claim("a", holder="r1", limit=10, lease_s=60)
    assert len(first) == 2
    assert await other.claim("a", holder="r2", limit=10, lease_s=60) == []
    assert await webhooks.due_endpoints() == {}
    # A failed attempt is due again after its wait; a success is final whoever holds it.
    retried, done = first
    assert await webhooks.finish_attempt(
        retried.id, holder="r1", status="pending", retry_in_s=0.0,
        status_code=500, error="answered 500", now=NOW,
    )  # fmt: skip
    assert not await other.finish_attempt(
        done.id, holder="r2", status="failed", retry_in_s=None,
        status_code=500, error="answered 500", now=NOW,
    )  # fmt: skip  # r2 holds no lease on it
    assert await other.finish_attempt(
        done.id, holder="r2", status="succeeded", retry_in_s=None,
        status_code=200, error=None, now=NOW,
    )  # fmt: skip
    [again] = await other.claim("a", holder="r2", limit=10, lease_s=60)
    assert (again.id, again.attempts, again.message_id) == (retried.id, 1, retried.message_id)
    # A killed holder's leases are given back at its next start.
    assert await other.release_leases("r2") == 1
    [back] = await webhooks.claim("a", holder="r1", limit=10, lease_s=60)
    assert back.id == retried.id
    logged = {d.id: d for d in await webhooks.deliveries("a", status=None, limit=10, before=None)}
    assert logged[done.id].status == "succeeded"
    assert logged[done.id].sent_by == "r2"
    assert logged[retried.id].attempts == 1
    other.close()
    await log.aclose()


async def test_a_claim_on_postgresql_skips_what_another_transaction_holds(
    store: Store, webhooks: WebhookStore, database_url: str
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite serves one gateway: its claims never meet another's")
    log = EventLog(store, outbox=_outbox("turn.completed"))
    for i in range(4):
        await log.append(SESSION if i % 2 else OTHER, TurnCompleted(final_text=str(i)))
    await _route_all(webhooks, "a")
    async with store.engine.connect() as locker:
        transaction = await locker.begin()
        held = (
            (
                await locker.execute(
                    text(
                        "SELECT id FROM webhook_deliveries ORDER BY next_attempt_s, id LIMIT 2 "
                        "FOR UPDATE"
                    )
                )
            )
            .scalars()
            .all()
        )
        async with asyncio.timeout(10):  # a claim that waited for the lock would hang here
            claimed = await webhooks.claim("a", holder="r1", limit=10, lease_s=60)
        await transaction.rollback()
    assert len(claimed) == 2
    assert not {c.id for c in claimed} & set(held)
    await log.aclose()

"""Driving the event log in a test: subscriptions typed as what they are, events appended or
stored directly, and their seqs taken with a timeout. The ``store`` and ``log`` fixtures
(a migrated SQLite file with two sessions, and its event log) are in conftest.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from datetime import UTC, datetime

from app.events import MessageDelta
from app.runtime.eventlog import EventLog
from app.runtime.subscription import LoggedEvent, StreamItem
from app.runtime.subscription import Subscription as Subscription_
from app.store.db import session_factory
from app.store.repository import Store
from app.store.tables import EventRow

NOW = datetime(2026, 5, 9, 12, 0, tzinfo=UTC)
SESSION, OTHER = "sess-a", "sess-b"

Subscription = AsyncGenerator[LoggedEvent | None, None]


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


async def store_directly(store: Store, count: int, *, first: int = 1) -> None:
    """Write ``count`` events (seqs from ``first``) in one transaction, as an earlier gateway
    process (or the replica running the session) would have."""
    async with session_factory(store.engine).begin() as db:
        db.add_all(
            EventRow(
                session_id=SESSION,
                seq=seq,
                at=NOW,
                type="message.delta",
                data=delta(seq).model_dump(mode="json"),
            )
            for seq in range(first, first + count)
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


async def items(subscription: Subscription_, count: int) -> list[StreamItem]:
    """The next ``count`` items of an ``open()`` subscription."""
    got: list[StreamItem] = []
    iterator = aiter(subscription)
    async with asyncio.timeout(10):
        for _ in range(count):
            got.append(await anext(iterator))
    return got

"""The event log: numbers each session's events, persists them, then fans them out.

An event is written to the store before any subscriber sees it, so a client that reconnects
with ``Last-Event-ID`` / ``after`` always finds in the store what it missed. A subscription
first registers its live queue, then replays the store, then follows the queue, dropping
what the replay already delivered. A subscriber whose queue fills up is not waited for: it
catches up from the store, so a slow reader never holds back an append or another reader.

Besides events, a subscription yields a few control items, each ending or bending the stream
visibly rather than silently:

- ``ResyncRequired``: the events after the cursor were pruned (``storage.max_events_per_session``);
  the stream continues from the oldest kept event.
- ``Evicted``: the subscriber fell more than ``max_lag_events`` behind the newest event; the
  stream ends and the client reconnects from ``last_seq_sent``, losing nothing.
- ``ShuttingDown``: the gateway is stopping; the stream ends.

``None`` is a keep-alive tick.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from app.errors import AtCapacity, TooManyRequests, Unavailable
from app.events import EventData, EventType
from app.observability.metrics import GatewayMetrics
from app.store.repository import EventRecord, Store

log = logging.getLogger(__name__)

REPLAY_PAGE = 500
CAP_RETRY_AFTER_S = 5.0
"""``Retry-After`` of a subscription refused at a subscriber cap or during shutdown."""


@dataclass(frozen=True, kw_only=True)
class LoggedEvent:
    """One persisted event with its wire form, encoded once for every subscriber."""

    seq: int
    session_id: str
    type: EventType
    turn_id: str | None
    json: str
    appended_at: float | None = None
    """``time.monotonic()`` of the append, on events handed to live subscribers (not replays)."""

    @classmethod
    def from_record(cls, record: EventRecord, *, appended_at: float | None = None) -> LoggedEvent:
        envelope: dict[str, Any] = {
            "seq": record.seq,
            "session_id": record.session_id,
            "turn_id": record.turn_id,
            "attempt": record.attempt,
            "provider": record.provider,
            "at": record.at.isoformat().replace("+00:00", "Z"),
            "type": record.type,
            "data": record.data,
        }
        return cls(
            seq=record.seq,
            session_id=record.session_id,
            type=record.type,
            turn_id=record.turn_id,
            json=json.dumps(envelope, separators=(",", ":"), ensure_ascii=False),
            appended_at=appended_at,
        )


@dataclass(frozen=True, kw_only=True)
class ResyncRequired:
    """Events after ``after`` are no longer kept; the stream goes on from ``first_seq``."""

    first_seq: int
    after: int


@dataclass(frozen=True, kw_only=True)
class Evicted:
    """The subscriber fell too far behind; it reconnects after ``last_seq_sent``."""

    last_seq_sent: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class ShuttingDown:
    """The gateway is stopping; clients reconnect after ``retry_ms``."""

    retry_ms: int


StreamItem = LoggedEvent | ResyncRequired | Evicted | ShuttingDown | None


@dataclass(eq=False)
class _Subscriber:
    queue: asyncio.Queue[LoggedEvent | None]
    baseline: int
    transport: str = "internal"
    """What the events are delivered over (``sse``, ``ws``, ``runs``), for the metrics."""
    """The newest seq when the subscription opened: older events are history it may replay
    at its own pace; only events appended since count towards its lag."""
    cursor: int = 0
    """The last seq handed to the client's transport."""
    overflowed: bool = False
    evicted: bool = False
    stopping: ShuttingDown | None = None

    def wake(self) -> None:
        try:
            self.queue.put_nowait(None)
        except asyncio.QueueFull:
            self.overflowed = True  # a full queue is read before the flags are looked at


@dataclass
class _Channel:
    last_seq: int
    first_seq: int
    """The oldest seq that may still be stored (lower after another process pruned)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    subscribers: set[_Subscriber] = field(default_factory=set)
    closed: asyncio.Event = field(default_factory=asyncio.Event)


class Subscription:
    """A registered subscriber: iterate it once; ``release()`` unregisters (idempotent).

    Registration happens when the subscription is opened, so caps are checked and counted
    before a response starts; iterating to the end, or ``release()``, gives the slot back.
    """

    def __init__(
        self,
        log_: EventLog,
        session_id: str,
        channel: _Channel,
        subscriber: _Subscriber,
        *,
        after: int,
        heartbeat_s: float | None,
    ) -> None:
        self._log = log_
        self._session_id = session_id
        self._channel = channel
        self._subscriber = subscriber
        self._after = after
        self._heartbeat_s = heartbeat_s
        self._iterator = self._items()

    def __aiter__(self) -> AsyncIterator[StreamItem]:
        return self._iterator

    def release(self) -> None:
        self._log._unregister(self._channel, self._subscriber)

    async def aclose(self) -> None:
        """Stop iterating (for a consumer that leaves before the end) and release."""
        await self._iterator.aclose()
        self.release()

    def _stop(self) -> Evicted | ShuttingDown | None:
        subscriber = self._subscriber
        if subscriber.stopping is not None:
            return subscriber.stopping
        if subscriber.evicted:
            return Evicted(last_seq_sent=subscriber.cursor, reason="lagging")
        return None

    async def _items(self) -> AsyncGenerator[StreamItem, None]:
        channel, subscriber = self._channel, self._subscriber
        cursor = subscriber.cursor = self._after
        try:
            while True:
                # A fresh queue before the replay: whatever is appended from now on is either
                # in the store when the replay reads it or in this queue, or both.
                subscriber.queue = asyncio.Queue(self._log._queue_size)
                subscriber.overflowed = False
                while True:  # replay what the store has past the cursor
                    if (stop := self._stop()) is not None:
                        yield stop
                        return
                    head = channel.last_seq
                    # Shielded: a client that hangs up mid-read cancels this generator, and a
                    # database call cancelled half-way costs its pooled connection.
                    page = await asyncio.shield(
                        self._log.page(self._session_id, after=cursor, limit=REPLAY_PAGE)
                    )
                    first = page[0].seq if page else head + 1
                    if first > cursor + 1 and (page or cursor < head):
                        log.info(
                            "subscriber of %s asked for events after %d; oldest kept is %d",
                            self._session_id,
                            cursor,
                            first,
                        )
                        yield ResyncRequired(first_seq=first, after=cursor)
                        cursor = subscriber.cursor = first - 1
                    for event in page:
                        if (stop := self._stop()) is not None:
                            yield stop
                            return
                        cursor = subscriber.cursor = event.seq
                        yield event
                    if len(page) < REPLAY_PAGE:
                        break
                while not subscriber.overflowed:
                    if (stop := self._stop()) is not None:
                        yield stop
                        return
                    if channel.closed.is_set() and subscriber.queue.empty():
                        if cursor >= channel.last_seq:
                            return
                        break  # the tail is in the store
                    try:
                        item = await asyncio.wait_for(subscriber.queue.get(), self._heartbeat_s)
                    except TimeoutError:
                        yield None
                        continue
                    if item is None or item.seq <= cursor:
                        continue
                    cursor = subscriber.cursor = item.seq
                    self._log._delivered(subscriber, item)
                    yield item
                log.debug(
                    "subscriber of %s fell behind at %d; catching up", self._session_id, cursor
                )
        finally:
            self.release()


class EventLog:
    """Per-session numbering, persistence, pruning and fan-out of events."""

    def __init__(
        self,
        store: Store,
        *,
        queue_size: int = 1000,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        max_events_per_session: int | None = None,
        max_lag_events: int | None = None,
        max_subscribers_per_session: int | None = None,
        max_subscribers: int | None = None,
        observer: Callable[[EventRecord], None] | None = None,
        metrics: GatewayMetrics | None = None,
    ) -> None:
        self._store = store
        self._observer = observer
        self._metrics = metrics
        self._queue_size = queue_size
        self._clock = clock
        self._max_events = max_events_per_session
        self._max_lag = max_lag_events
        self._max_per_session = max_subscribers_per_session
        self._max_total = max_subscribers
        self._channels: dict[str, _Channel] = {}
        self._channels_lock = asyncio.Lock()
        self._total = 0
        self._stopping: ShuttingDown | None = None

    async def _channel(self, session_id: str) -> _Channel:
        channel = self._channels.get(session_id)
        if channel is None:
            async with self._channels_lock:
                channel = self._channels.get(session_id)
                if channel is None:
                    first, last = await self._store.event_bounds(session_id)
                    channel = self._channels[session_id] = _Channel(last_seq=last, first_seq=first)
        return channel

    async def last_seq(self, session_id: str) -> int:
        return (await self._channel(session_id)).last_seq

    async def append(
        self,
        session_id: str,
        data: EventData,
        *,
        turn_id: str | None = None,
        attempt: int | None = None,
        provider: str | None = None,
    ) -> LoggedEvent:
        """Number, persist and publish one event; returns it once it is in the store.

        Shielded from the caller's cancellation: a turn cancelled while its event is being
        written must not leave the event stored but unnumbered in memory (the next append
        would reuse its seq). Raises ``StorageUnavailable`` when the store cannot take it;
        then nobody has seen the event and its seq is used by the next one.
        """
        return await asyncio.shield(
            self._append(session_id, data, turn_id=turn_id, attempt=attempt, provider=provider)
        )

    async def _append(
        self,
        session_id: str,
        data: EventData,
        *,
        turn_id: str | None,
        attempt: int | None,
        provider: str | None,
    ) -> LoggedEvent:
        channel = await self._channel(session_id)
        async with channel.lock:
            record = EventRecord(
                seq=channel.last_seq + 1,
                session_id=session_id,
                turn_id=turn_id,
                attempt=attempt,
                provider=provider,
                at=self._clock(),
                type=data.TYPE,
                data=data.model_dump(mode="json"),
            )
            prune_through = self._prune_point(channel, record.seq)
            await self._store.insert_event(record, prune_through=prune_through)
            channel.last_seq = record.seq
            if prune_through is not None:
                channel.first_seq = prune_through + 1
            event = LoggedEvent.from_record(record, appended_at=time.monotonic())
            for subscriber in list(channel.subscribers):
                lag = record.seq - max(subscriber.cursor, subscriber.baseline)
                if self._max_lag is not None and lag > self._max_lag:
                    self._evict(channel, subscriber, session_id)
                    continue
                if subscriber.overflowed:
                    continue
                try:
                    subscriber.queue.put_nowait(event)
                except asyncio.QueueFull:
                    subscriber.overflowed = True
        if self._observer is not None:
            self._observer(record)
        return event

    def _delivered(self, subscriber: _Subscriber, event: LoggedEvent) -> None:
        if self._metrics is not None and event.appended_at is not None:
            lag_s = time.monotonic() - event.appended_at
            self._metrics.delivery_lag.labels(transport=subscriber.transport).observe(lag_s)

    def _prune_point(self, channel: _Channel, seq: int) -> int | None:
        """Prune in batches of a tenth of the cap, so most appends delete nothing."""
        if self._max_events is None:
            return None
        keep_from = seq - self._max_events + 1
        if keep_from - channel.first_seq < max(1, self._max_events // 10):
            return None
        return keep_from - 1

    def _evict(self, channel: _Channel, subscriber: _Subscriber, session_id: str) -> None:
        log.warning(
            "subscriber of %s evicted: more than %d events behind (sent up to %d)",
            session_id,
            self._max_lag,
            subscriber.cursor,
            extra={"session_id": session_id, "last_seq_sent": subscriber.cursor},
        )
        subscriber.evicted = True
        self._unregister(channel, subscriber)
        subscriber.wake()

    async def page(self, session_id: str, *, after: int, limit: int) -> list[LoggedEvent]:
        records = await self._store.events_after(session_id, after=after, limit=limit)
        return [LoggedEvent.from_record(r) for r in records]

    async def open(
        self,
        session_id: str,
        *,
        after: int,
        heartbeat_s: float | None = None,
        check_limits: bool = True,
        transport: str = "internal",
    ) -> Subscription:
        """Register a subscriber of the session's events with ``seq > after``.

        Raises ``TooManyRequests`` at ``max_subscribers_per_session``, ``AtCapacity`` at
        ``max_subscribers`` (both with ``Retry-After``), ``Unavailable`` once shutdown began.
        """
        channel = await self._channel(session_id)
        self._refuse_while_stopping()
        if check_limits:
            self._refuse_at_caps(len(channel.subscribers))
        subscriber = _Subscriber(
            queue=asyncio.Queue(self._queue_size),
            baseline=channel.last_seq,
            cursor=after,
            transport=transport,
        )
        channel.subscribers.add(subscriber)
        self._total += 1
        return Subscription(
            self, session_id, channel, subscriber, after=after, heartbeat_s=heartbeat_s
        )

    def check_capacity(self) -> None:
        """Raise what ``open()`` would for a subscriber of a session that has none yet,
        registering nothing: lets a request be refused before it creates that session."""
        self._refuse_while_stopping()
        self._refuse_at_caps(0)

    def _refuse_while_stopping(self) -> None:
        if self._stopping is not None:
            raise Unavailable(
                "the gateway is shutting down; reconnect shortly",
                retry_after_s=max(1.0, self._stopping.retry_ms / 1000),
            )

    def _refuse_at_caps(self, session_subscribers: int) -> None:
        if self._max_per_session is not None and session_subscribers >= self._max_per_session:
            raise TooManyRequests(
                f"this session already has {session_subscribers} event subscribers "
                f"(limits.max_subscribers_per_session); close one or retry later",
                retry_after_s=CAP_RETRY_AFTER_S,
                limit=self._max_per_session,
            )
        if self._max_total is not None and self._total >= self._max_total:
            raise AtCapacity(
                f"the gateway serves its maximum of {self._max_total} event subscribers "
                "(limits.max_subscribers); retry later",
                retry_after_s=CAP_RETRY_AFTER_S,
                limit=self._max_total,
            )

    def _unregister(self, channel: _Channel, subscriber: _Subscriber) -> None:
        if subscriber in channel.subscribers:
            channel.subscribers.discard(subscriber)
            self._total -= 1

    async def subscribe(
        self, session_id: str, *, after: int, heartbeat_s: float | None = None
    ) -> AsyncIterator[LoggedEvent | None]:
        """Every event with ``seq > after``, in order, none twice; ends when the log closes.

        With ``heartbeat_s``, yields ``None`` after that long without an event (keep-alive).
        Not subject to the subscriber caps. Where events were pruned it goes on from the
        oldest kept one; an eviction or shutdown ends it. Clients' streams use ``open()`` and
        get its control items instead.
        """
        subscription = await self.open(
            session_id, after=after, heartbeat_s=heartbeat_s, check_limits=False
        )
        items = subscription._iterator
        try:
            async for item in items:
                if isinstance(item, Evicted | ShuttingDown):
                    return
                if not isinstance(item, ResyncRequired):
                    yield item
        finally:
            await items.aclose()
            subscription.release()

    async def close(self, session_id: str) -> None:
        """End every subscription of the session once it has delivered the last event."""
        channel = await self._channel(session_id)
        channel.closed.set()
        for subscriber in channel.subscribers:
            subscriber.wake()

    def shutdown(self, retry_ms: int) -> None:
        """End every subscription with ``ShuttingDown``; later ``open()`` calls are refused."""
        self._stopping = ShuttingDown(retry_ms=retry_ms)
        for channel in self._channels.values():
            for subscriber in list(channel.subscribers):
                subscriber.stopping = self._stopping
                self._unregister(channel, subscriber)
                subscriber.wake()

    def subscriber_count(self, session_id: str | None = None) -> int:
        if session_id is None:
            return self._total
        channel = self._channels.get(session_id)
        return len(channel.subscribers) if channel else 0

    def subscribers_by_transport(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for channel in self._channels.values():
            for subscriber in channel.subscribers:
                counts[subscriber.transport] = counts.get(subscriber.transport, 0) + 1
        return counts

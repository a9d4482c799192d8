"""The one delivery step: how a session's stored events reach its subscribers on this replica.

Every batch goes through ``Delivery.deliver``, whichever way it arrived: written by this
replica's event log (app/runtime/eventlog.py) or mirrored from the replica that runs the
session (app/runtime/replicas.py). So every subscriber on every replica gets the same limits:

- a subscriber more than ``max_lag_events`` behind when a batch arrives is evicted;
- a parked subscriber with a direct writer gets the batch on its connection, the others in
  their queue, and a full queue switches a subscriber to reading the store;
- one delivery-lag sample per transport and hand-over.

``Delivery`` also keeps each session's channel, registers subscribers under the caps, tells
them when their events stop and start again coming live (``notify``), and ends every stream
at shutdown. What a subscriber then reads is in app/runtime/subscription.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from app.errors import TooManyRequests, Unavailable
from app.observability.metrics import GatewayMetrics
from app.runtime.commands import Issuer
from app.runtime.shares import CAP_RETRY_AFTER_S, SharedCap, Tally, subscriber_cap
from app.runtime.subscription import (
    Channel,
    Degraded,
    LoggedEvent,
    Notice,
    ShuttingDown,
    Subscriber,
    Subscription,
)
from app.store.interface import Storage

log = logging.getLogger(__name__)


class Delivery:
    """The channels of this replica's sessions, their subscribers and the delivery step."""

    def __init__(
        self,
        store: Storage,
        *,
        queue_size: int = 1000,
        max_lag_events: int | None = None,
        max_subscribers_per_session: int | None = None,
        max_subscribers: int | SharedCap | None = None,
        metrics: GatewayMetrics | None = None,
    ) -> None:
        self._store = store
        self.queue_size = queue_size
        """Live events a subscriber's queue holds before it reads the store instead."""
        self._max_lag = max_lag_events
        self._max_per_session = max_subscribers_per_session
        self._metrics = metrics
        self._streams = Tally(subscriber_cap(max_subscribers))
        self._channels: dict[str, Channel] = {}
        self._channels_lock = asyncio.Lock()
        self._stopping: ShuttingDown | None = None

    # --- channels ------------------------------------------------------------------------------

    def known(self, session_id: str) -> Channel | None:
        """The session's channel, if one was opened on this replica."""
        return self._channels.get(session_id)

    async def channel(self, session_id: str) -> Channel:
        """The session's channel, numbered from the store when first opened."""
        channel = self._channels.get(session_id)
        if channel is None:
            async with self._channels_lock:
                channel = self._channels.get(session_id)
                if channel is None:
                    first, last = await self._store.event_bounds(session_id)
                    channel = self._channels[session_id] = Channel(
                        session_id, last_seq=last, first_seq=first
                    )
        return channel

    async def page(self, session_id: str, *, after: int, limit: int) -> list[LoggedEvent]:
        """Up to ``limit`` stored events of the session with ``seq > after``, oldest first."""
        stored = await self._store.events_after(session_id, after=after, limit=limit)
        return [
            LoggedEvent(
                seq=e.seq, session_id=session_id, type=e.type, turn_id=e.turn_id, json=e.json
            )
            for e in stored
        ]

    # --- the delivery step ---------------------------------------------------------------------

    def deliver(
        self, channel: Channel, events: Sequence[LoggedEvent], *, first_seq: int | None = None
    ) -> None:
        """Hand one stored batch of the session (seqs past ``channel.last_seq``, in order) to
        its subscribers; ``first_seq``: the oldest seq still stored, when pruning moved it.

        A subscriber is evicted for how far behind it was when the batch arrived: the events
        of one batch reach every queue at once, before anyone could read, so they do not count
        against it.
        """
        if self._max_lag is not None:
            for subscriber in list(channel.subscribers):
                lag = channel.last_seq - max(subscriber.cursor, subscriber.baseline)
                if lag > self._max_lag:
                    self._evict(channel, subscriber)
        channel.last_seq = events[-1].seq
        channel.assigned_seq = max(channel.assigned_seq, channel.last_seq)
        if first_seq is not None:
            channel.first_seq = max(channel.first_seq, first_seq)
        written = fan_out(channel, events)
        if written:  # one observation per transport and batch written directly
            seen: set[str] = set()
            for subscriber in written:
                if subscriber.transport not in seen:
                    seen.add(subscriber.transport)
                    self.delivered(subscriber, events[0])

    @staticmethod
    def notify(channel: Channel, notice: Notice) -> None:
        """Tell the channel's subscribers how its events reach them now (``Degraded``: from the
        store, ``Recovered``: live again), in order with the events delivered; one that opens
        while it is degraded is told when it opens."""
        channel.degraded = notice if isinstance(notice, Degraded) else None
        for subscriber in channel.subscribers:
            subscriber.tell(notice, after=channel.last_seq)

    @staticmethod
    def count_lag_after(channel: Channel, seq: int) -> None:
        """Events up to ``seq`` were stored before the channel's subscribers could follow them
        (another replica wrote them while this one did not follow): history they read at
        their own pace, not lag, however late the channel delivers them."""
        for subscriber in channel.subscribers:
            subscriber.baseline = max(subscriber.baseline, seq)

    @staticmethod
    def advance(channel: Channel, *, first_seq: int) -> None:
        """Move the channel past events that are no longer stored (pruned before this replica
        delivered them): its subscribers read from the store, where a resync tells them."""
        channel.first_seq = max(channel.first_seq, first_seq)
        if first_seq - 1 <= channel.last_seq:
            return
        channel.last_seq = channel.assigned_seq = first_seq - 1
        for subscriber in channel.subscribers:
            subscriber.baseline = max(subscriber.baseline, channel.last_seq)
        catch_up_from_store(channel)

    def delivered(self, subscriber: Subscriber, event: LoggedEvent) -> None:
        """Record the delivery lag of a hand-over by its oldest event (the others in it
        waited less): one observation per hand-over, not per event."""
        if self._metrics is not None and event.appended_at is not None:
            lag = subscriber.lag
            if lag is None:
                lag = subscriber.lag = self._metrics.delivery_lag.labels(
                    transport=subscriber.transport
                )
            lag.observe(time.monotonic() - event.appended_at)

    def _evict(self, channel: Channel, subscriber: Subscriber) -> None:
        log.warning(
            "subscriber of %s evicted: more than %d events behind (sent up to %d)",
            channel.session_id,
            self._max_lag,
            subscriber.cursor,
            extra={"session_id": channel.session_id, "last_seq_sent": subscriber.cursor},
        )
        subscriber.evicted = True
        self.unregister(channel, subscriber)
        subscriber.wake()

    # --- subscribers ---------------------------------------------------------------------------

    def open(
        self,
        channel: Channel,
        *,
        after: int,
        heartbeat_s: float | None,
        check_limits: bool,
        transport: str,
        holder: Issuer | None,
    ) -> Subscription:
        """Register a subscriber of the channel's events with ``seq > after`` (see
        ``EventLog.open`` for what it raises)."""
        self._refuse_while_stopping()
        if check_limits:
            self._refuse_at_caps(len(channel.subscribers), holder)
        subscriber = Subscriber(
            queue=asyncio.Queue(self.queue_size),
            baseline=channel.last_seq,
            cursor=after,
            transport=transport,
            holder=holder,
        )
        if channel.degraded is not None:
            subscriber.notices.append((channel.last_seq, channel.degraded))
        channel.subscribers.add(subscriber)
        self._streams.add(holder)
        return Subscription(
            self, channel.session_id, channel, subscriber, after=after, heartbeat_s=heartbeat_s
        )

    def check_capacity(self, holder: Issuer | None = None) -> None:
        """Raise what ``open()`` would for ``holder``'s subscriber of a session that has none
        yet, registering nothing."""
        self._refuse_while_stopping()
        self._refuse_at_caps(0, holder)

    def _refuse_while_stopping(self) -> None:
        if self._stopping is not None:
            raise Unavailable(
                "the gateway is shutting down; reconnect shortly",
                retry_after_s=max(1.0, self._stopping.retry_ms / 1000),
            )

    def _refuse_at_caps(self, session_subscribers: int, holder: Issuer | None) -> None:
        if self._max_per_session is not None and session_subscribers >= self._max_per_session:
            raise TooManyRequests(
                f"this session already has {session_subscribers} event subscribers "
                f"(limits.max_subscribers_per_session); close one or retry later",
                retry_after_s=CAP_RETRY_AFTER_S,
                limit=self._max_per_session,
            )
        self._streams.check(holder)

    def unregister(self, channel: Channel, subscriber: Subscriber) -> None:
        """Give the subscriber's slot back (idempotent)."""
        if subscriber in channel.subscribers:
            channel.subscribers.discard(subscriber)
            self._streams.remove(subscriber.holder)

    def close(self, channel: Channel) -> None:
        """End every subscription of the channel once it has delivered the last event."""
        channel.closed.set()
        for subscriber in channel.subscribers:
            subscriber.wake()

    def shutdown(self, retry_ms: int) -> None:
        """End every subscription with ``ShuttingDown``; later ``open()`` calls are refused."""
        self._stopping = ShuttingDown(retry_ms=retry_ms)
        for channel in self._channels.values():
            for subscriber in list(channel.subscribers):
                subscriber.stopping = self._stopping
                self.unregister(channel, subscriber)
                subscriber.wake()

    def subscriber_count(self, session_id: str | None = None) -> int:
        if session_id is None:
            return self._streams.total
        channel = self._channels.get(session_id)
        return len(channel.subscribers) if channel else 0

    def subscribers_by_transport(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for channel in self._channels.values():
            for subscriber in channel.subscribers:
                counts[subscriber.transport] = counts.get(subscriber.transport, 0) + 1
        return counts


def catch_up_from_store(channel: Channel) -> None:
    """Have every subscriber read what it may have missed from the store (the channel's
    numbering moved without them: another replica wrote, or events were pruned)."""
    for subscriber in channel.subscribers:
        subscriber.overflowed = True
        subscriber.wake()


def fan_out(channel: Channel, events: Sequence[LoggedEvent]) -> list[Subscriber]:
    """Hand one batch to the channel's subscribers; returns those it was written to directly.

    A parked subscriber with a direct writer gets the batch on its connection at once, the
    bytes made once per connection kind; the others get it in their queue (a full queue
    switches that subscriber to reading the store)."""
    first = events[0].seq
    encoded: dict[str, bytes] = {}
    direct: list[Subscriber] = []
    for subscriber in channel.subscribers:
        if subscriber.overflowed:
            continue
        way = subscriber.direct
        if way is not None and subscriber.parked and subscriber.cursor >= first - 1:
            fresh = (
                events
                if subscriber.cursor < first
                else [e for e in events if e.seq > subscriber.cursor]
            )
            if not fresh:
                continue
            kind = way.writer.kind
            data = encoded.get(kind) if fresh is events else None
            if data is None:
                data = way.encode(fresh)
                if fresh is events:
                    encoded[kind] = data
            if way.writer.write(data):
                subscriber.cursor = fresh[-1].seq
                direct.append(subscriber)
                continue
        queue = subscriber.queue
        for event in events:
            try:
                queue.put_nowait(event)
            except asyncio.QueueFull:
                subscriber.overflowed = True
                break
    return direct

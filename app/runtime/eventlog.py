"""The event log: numbers each session's events, persists them, then delivers them.

An event is written to the store before any subscriber sees it, so a client that reconnects
with ``Last-Event-ID`` / ``after`` always finds in the store what it missed. Each stored batch
goes through the one delivery step (app/runtime/delivery.py), as do the batches mirrored from
another replica (app/runtime/replicas.py); what subscribers receive, and how a subscription
replays and follows, is in app/runtime/subscription.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime

from app.errors import SessionFenced, StorageUnavailable
from app.events import EventData, StreamedText, encode_event, stored_time
from app.observability.metrics import GatewayMetrics
from app.observability.tracing import OFF, Tracer
from app.records import EventRecord
from app.redaction import SecretMask
from app.runtime.cluster import Cluster
from app.runtime.coalesce import Coalescer, Origin
from app.runtime.commands import Issuer
from app.runtime.delivery import Delivery, catch_up_from_store
from app.runtime.pending import Outbox, Pending, retrieve, settle
from app.runtime.replicas import Replicas
from app.runtime.shares import SharedCap
from app.runtime.spans import written
from app.runtime.subscription import (
    Channel,
    Evicted,
    LoggedEvent,
    ShuttingDown,
    Subscription,
)
from app.store.interface import Storage

log = logging.getLogger(__name__)


MAX_BATCH = 500
"""Events stored in one transaction at most."""
MAX_PENDING = 5000
"""Queued events beyond which every appender waits for its commit."""


class EventLog:
    """Per-session numbering, persistence and pruning of events, and their subscriptions."""

    def __init__(
        self,
        store: Storage,
        *,
        queue_size: int = 1000,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        max_events_per_session: int | None = None,
        max_lag_events: int | None = None,
        max_subscribers_per_session: int | None = None,
        max_subscribers: int | SharedCap | None = None,
        observer: Callable[[Sequence[EventRecord]], None] | None = None,
        metrics: GatewayMetrics | None = None,
        mask: SecretMask | None = None,
        cluster: Cluster | None = None,
        coalesce_s: float = 0.0,
        tracer: Tracer = OFF,
        outbox: Outbox | None = None,
    ) -> None:
        self._store = store
        self.tracer = tracer
        """Traces the log's writes, and the turns that append to it."""
        self._outbox = outbox
        self._coalescer: Coalescer[Channel] = Coalescer(coalesce_s, self._release)
        self._cluster = cluster
        self._delivery = Delivery(
            store,
            queue_size=queue_size,
            max_lag_events=max_lag_events,
            max_subscribers_per_session=max_subscribers_per_session,
            max_subscribers=max_subscribers,
            metrics=metrics,
        )
        self._replicas = (
            Replicas(cluster, store=store, delivery=self._delivery, close=self.close)
            if cluster is not None
            else None
        )
        self.mask = mask if mask is not None else SecretMask(())
        """Configured secrets, replaced in every payload before it is stored or sent."""
        self._observer = observer
        self._clock = clock
        self._max_events = max_events_per_session
        self._pending: list[Pending] = []
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._drained: list[asyncio.Future[None]] = []
        self._writing = False

    @property
    def joins_deltas(self) -> bool:
        """Streamed deltas are joined (``server.coalesce_deltas_ms`` > 0)."""
        return self._coalescer.window_s > 0

    async def last_seq(self, session_id: str) -> int:
        channel = await self._delivery.channel(session_id)
        if self._cluster is None:
            return channel.last_seq
        # Another replica may be writing it (or have taken it over since): the store knows.
        _, last = await self._store.event_bounds(session_id)
        return max(channel.last_seq, last)

    async def append(
        self,
        session_id: str,
        data: EventData,
        *,
        turn_id: str | None = None,
        attempt: int | None = None,
        provider: str | None = None,
        durable: bool = True,
        data_json: str | None = None,
    ) -> LoggedEvent:
        """Number one event and hand it to the writer; publish it once it is stored.

        Events are written by one writer task in batches (one transaction for whatever
        queued up while the previous commit ran), then published in order, so no subscriber
        ever sees an event that is not in the store. With ``durable`` (the default) this
        returns once the event is stored, and raises ``StorageUnavailable`` when the store
        cannot take it: then nobody has seen it and its seq is used by the next one. Without,
        it returns at once (for the stream of deltas a CLI prints, which would otherwise wait
        for one commit each); a failed write is then raised by the session's next append.
        Cancelling the caller never cancels the write. ``data_json`` is ``data`` already
        encoded (``model_dump_json()``), for a caller that encoded it to measure it.
        """
        channel = await self._writable_channel(session_id)
        self._coalescer.flush(session_id)
        event, done = self._number(
            channel,
            data,
            (turn_id, attempt, provider),
            data_json=data_json,
            wait=durable or len(self._pending) >= MAX_PENDING,
        )
        if done is not None:
            return await asyncio.shield(done)
        return event

    async def stream(
        self,
        session_id: str,
        data: StreamedText,
        *,
        turn_id: str | None = None,
        attempt: int | None = None,
        provider: str | None = None,
    ) -> None:
        """Append a streamed delta without waiting for its commit, joined with the deltas of
        the same item that follow it within the coalescing window (app/runtime/coalesce.py).
        A failed write surfaces at the session's next append."""
        channel = await self._writable_channel(session_id)
        origin = (turn_id, attempt, provider)
        if self._coalescer.add(session_id, channel, data, origin):
            return
        _, done = self._number(
            channel, data, origin, data_json=None, wait=len(self._pending) >= MAX_PENDING
        )
        if done is not None:  # past MAX_PENDING queued events even a streamer waits
            await asyncio.shield(done)

    async def _writable_channel(self, session_id: str) -> Channel:
        """The session's channel; raises the failed write of events nobody waited for."""
        channel = self._delivery.known(session_id) or await self._delivery.channel(session_id)
        if channel.failure is not None:
            failure, channel.failure = channel.failure, None
            raise failure
        return channel

    def _release(self, channel: Channel, data: StreamedText, origin: Origin) -> None:
        """Number a joined delta the coalescer held (nobody waits for it)."""
        self._number(channel, data, origin, data_json=None, wait=False)

    def _number(
        self,
        channel: Channel,
        data: EventData,
        origin: Origin,
        *,
        data_json: str | None,
        wait: bool,
    ) -> tuple[LoggedEvent, asyncio.Future[LoggedEvent] | None]:
        """Give the event the session's next seq and queue it for the writer."""
        if data_json is None:
            data_json = data.model_dump_json()
        if self.mask:
            data_json = self.mask.json(data_json)
        at = self._clock()
        session_id = channel.session_id
        turn_id, attempt, provider = origin
        record = EventRecord(
            seq=channel.assigned_seq + 1,
            session_id=session_id,
            turn_id=turn_id,
            attempt=attempt,
            provider=provider,
            at=at,
            at_text=stored_time(at),
            type=data.TYPE,
            data_json=data_json,
        )
        channel.assigned_seq = record.seq
        event = LoggedEvent(
            seq=record.seq,
            session_id=session_id,
            type=record.type,
            turn_id=turn_id,
            json=encode_event(
                seq=record.seq,
                session_id=session_id,
                turn_id=turn_id,
                attempt=attempt,
                provider=provider,
                at=record.at_text,
                type=record.type,
                data_json=data_json,
            ),
            appended_at=time.monotonic(),
        )
        done: asyncio.Future[LoggedEvent] | None = None
        if wait:
            done = asyncio.get_running_loop().create_future()
            done.add_done_callback(retrieve)
        # Its write's trace (tracing on): that of an appender who waits, or of a batch's first.
        traced = self.tracer.on and (done is not None or not self._pending)
        trace = self.tracer.context() if traced else None
        pending = Pending(channel=channel, record=record, event=event, done=done, trace=trace)
        self._pending.append(pending)
        self._wake.set()
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_loop(), name="event-log-writer")
        return event, done

    async def flush(self) -> None:
        """Wait until every event appended so far is stored (or has failed)."""
        self._coalescer.flush_all()
        if not self._pending and not self._writing:
            return
        drained = asyncio.get_running_loop().create_future()
        self._drained.append(drained)
        self._wake.set()
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_loop(), name="event-log-writer")
        await drained

    async def aclose(self) -> None:
        """Store what is queued, then stop the writer (and the replicas' feeds)."""
        if self._replicas is not None:
            self._replicas.cancel()
        await self.flush()
        if self._writer is not None:
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
            self._writer = None

    async def _write_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                self._writing = True
                try:
                    await self._commit(batch)
                except Exception:  # never leave an appender waiting
                    log.exception("the event log writer failed")
                    for item in batch:
                        settle(item, error=StorageUnavailable("the event log writer failed"))
                finally:
                    self._writing = False
            drained, self._drained = self._drained, []
            for waiter in drained:
                if not waiter.done():
                    waiter.set_result(None)

    async def _commit(self, batch: list[Pending]) -> None:
        prunes: dict[str, int] = {}
        for item in batch:  # the newest seq of each session decides its pruning
            point = self._prune_point(item.channel, item.record.seq)
            if point is not None:
                prunes[item.record.session_id] = point
        fences: dict[str, int] | None = None
        if self._cluster is not None:
            fences = {}
            for item in batch:
                token = self._cluster.token(item.record.session_id)
                fences[item.record.session_id] = token if token is not None else 0
        records = [item.record for item in batch]
        messages = self._outbox.messages(records) if self._outbox is not None else []
        try:
            with written(self.tracer, [item.trace for item in batch], len(batch)):
                await self._store.insert_events(
                    records, prune_through=prunes, fences=fences, outbox=messages
                )
        except Exception as exc:
            channels = {id(item.channel) for item in batch}
            if len(channels) > 1:  # one session's failure must not fail the others
                for channel_id in channels:
                    await self._commit([i for i in batch if id(i.channel) == channel_id])
                return
            self._fail(batch, exc)
            return
        if messages and self._outbox is not None:
            self._outbox.stored(messages)
        by_session: dict[str, list[Pending]] = {}
        for item in batch:
            by_session.setdefault(item.record.session_id, []).append(item)
        for session_id, items in by_session.items():
            self._publish(items, prunes.get(session_id))

    def _fail(self, batch: list[Pending], exc: Exception) -> None:
        """Roll the session's numbering back to its last stored event and fail everything of
        it still queued (those seqs followed the failed ones)."""
        channel = batch[0].channel
        later = [item for item in self._pending if item.channel is channel]
        if later:
            self._pending = [item for item in self._pending if item.channel is not channel]
        failed = batch + later
        channel.assigned_seq = channel.last_seq
        if isinstance(exc, SessionFenced) and self._cluster is not None:
            for session_id in exc.session_ids:  # another replica runs it: it is lost here
                self._cluster.fenced(session_id)
        elif not isinstance(exc, StorageUnavailable):  # another database error: raised as is
            log.error("could not store events of %s: %s", batch[0].record.session_id, exc)
        if not any(item.done is not None for item in failed):
            channel.failure = exc  # nobody waited: tell the session's next append
        for item in failed:
            settle(item, error=exc)

    def _publish(self, items: list[Pending], prune_through: int | None) -> None:
        """Deliver one session's newly stored events to its subscribers here, in order, then
        to the other replicas'."""
        session_id = items[0].record.session_id
        self._delivery.deliver(
            items[0].channel,
            [item.event for item in items],
            first_seq=None if prune_through is None else prune_through + 1,
        )
        if self._observer is not None:
            with self.tracer.within(items[0].trace):  # its lines name the appender's trace
                self._observer([item.record for item in items])
        if self._replicas is not None:
            self._replicas.publish(session_id, [(i.record.seq, i.event.json) for i in items])
        for item in items:
            settle(item, event=item.event)

    # --- several replicas ---------------------------------------------------------------------

    async def take_over(self, session_id: str) -> None:
        """This replica holds the session now: stop following it elsewhere and number its
        events from what the store holds (the previous owner can no longer add any)."""
        if self._replicas is not None:
            await self._replicas.stop_following(session_id)
        channel = self._delivery.known(session_id)
        if channel is None:
            return
        first, last = await self._store.event_bounds(session_id)
        if last != channel.last_seq:
            catch_up_from_store(channel)
        channel.first_seq, channel.last_seq = first, last
        channel.assigned_seq = last
        channel.failure = None

    def let_go(self, session_id: str) -> None:
        """This replica no longer holds the session: its subscribers here follow the owner."""
        channel = self._delivery.known(session_id)
        if channel is not None and channel.subscribers and self._replicas is not None:
            self._replicas.follow(channel)

    def _prune_point(self, channel: Channel, seq: int) -> int | None:
        """Prune in batches of a tenth of the cap, so most appends delete nothing."""
        if self._max_events is None:
            return None
        keep_from = seq - self._max_events + 1
        if keep_from - channel.first_seq < max(1, self._max_events // 10):
            return None
        return keep_from - 1

    async def page(self, session_id: str, *, after: int, limit: int) -> list[LoggedEvent]:
        return await self._delivery.page(session_id, after=after, limit=limit)

    async def open(
        self,
        session_id: str,
        *,
        after: int,
        heartbeat_s: float | None = None,
        check_limits: bool = True,
        transport: str = "internal",
        holder: Issuer | None = None,
    ) -> Subscription:
        """Register a subscriber of the session's events with ``seq > after``, held by the
        key ``holder`` (app/runtime/shares.py).

        Raises ``TooManyRequests`` at ``max_subscribers_per_session``, ``KeyShareExceeded`` at
        the key's share of ``max_subscribers``, ``AtCapacity`` at ``max_subscribers`` (all with
        ``Retry-After``), ``Unavailable`` once shutdown began.
        """
        channel = await self._delivery.channel(session_id)
        subscription = self._delivery.open(
            channel,
            after=after,
            heartbeat_s=heartbeat_s,
            check_limits=check_limits,
            transport=transport,
            holder=holder,
        )
        if self._replicas is not None:
            self._replicas.follow(channel)
        return subscription

    def check_capacity(self, holder: Issuer | None = None) -> None:
        """Raise what ``open()`` would for ``holder``'s subscriber of a session that has none
        yet, registering nothing: lets a request be refused before it creates that session."""
        self._delivery.check_capacity(holder)

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
                if item is None or isinstance(item, LoggedEvent):
                    yield item
        finally:
            await items.aclose()
            subscription.release()

    async def close(self, session_id: str) -> None:
        """End every subscription of the session once it has delivered the last event."""
        self._coalescer.forget(session_id)
        self._delivery.close(await self._delivery.channel(session_id))

    def shutdown(self, retry_ms: int) -> None:
        """End every subscription with ``ShuttingDown``; later ``open()`` calls are refused."""
        self._delivery.shutdown(retry_ms)

    def subscriber_count(self, session_id: str | None = None) -> int:
        return self._delivery.subscriber_count(session_id)

    def subscribers_by_transport(self) -> dict[str, int]:
        return self._delivery.subscribers_by_transport()

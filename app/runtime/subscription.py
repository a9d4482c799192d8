"""What a subscriber of a session's events receives, and the subscription that hands it over.

A subscription first registers its live queue, then replays the store, then follows the queue,
dropping what the replay already delivered. A subscriber whose queue fills up is not waited
for: it catches up from the store, so a slow reader never holds back an append or another
reader.

Besides events, a subscription yields a few control items, each ending or bending the stream
visibly rather than silently:

- ``ResyncRequired``: the events after the cursor were pruned (``storage.max_events_per_session``);
  the stream continues from the oldest kept event.
- ``Evicted``: the subscriber fell more than ``max_lag_events`` behind the newest event; the
  stream ends and the client reconnects from ``last_seq_sent``, losing nothing.
- ``ShuttingDown``: the gateway is stopping; the stream ends.
- ``Degraded``: on a replica that does not run the session, Redis cannot be reached, so the
  events come from the store, read every ``poll_ms``: later than live, but each once and in
  order. ``Recovered``: they come live again. Neither ends the stream; each is placed by the
  newest seq when it was given (``Subscriber.tell``): after the events delivered before it,
  before those delivered after it, whether they come from the queue or the store.

``None`` is a keep-alive tick.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import Histogram

from app.events import EventType
from app.process.queues import next_item
from app.runtime.commands import Issuer

log = logging.getLogger(__name__)

REPLAY_PAGE = 500
"""Events read from the store at a time by a subscription catching up."""


@dataclass(kw_only=True, slots=True, eq=False)
class LoggedEvent:
    """One stored event with its wire form, encoded once for every subscriber (treated as
    immutable; not frozen, because a frozen dataclass costs twice as much to make and one is
    made per event)."""

    seq: int
    session_id: str
    type: EventType
    turn_id: str | None
    json: str
    appended_at: float | None = None
    """``time.monotonic()`` of the append, on events handed to live subscribers (not replays)."""
    _sse: bytes | None = None
    _utf8: bytes | None = None

    @property
    def utf8(self) -> bytes:
        """The envelope's bytes (a WebSocket frame's payload), encoded once."""
        if self._utf8 is None:
            self._utf8 = self.json.encode()
        return self._utf8

    @property
    def sse(self) -> bytes:
        """The SSE message: ``data:`` the envelope (JSON text has no line breaks), ``id:`` the
        seq; built on first use and shared by every subscriber."""
        if self._sse is None:
            self._sse = f"data: {self.json}\nid: {self.seq}\n\n".encode()
        return self._sse


@dataclass(frozen=True, kw_only=True)
class ResyncRequired:
    """Events after ``after`` are no longer kept; the stream goes on from ``first_seq``."""

    first_seq: int
    after: int


@dataclass(frozen=True, kw_only=True)
class Evicted:
    """The stream ended early (``reason``: ``lagging``, it fell too far behind; or why
    ``Subscription.end`` ended it); the client reconnects after ``last_seq_sent``."""

    last_seq_sent: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class ShuttingDown:
    """The gateway is stopping; clients reconnect after ``retry_ms``."""

    retry_ms: int


@dataclass(frozen=True, kw_only=True)
class Degraded:
    """The session's events no longer come live (``reason``: ``redis_unreachable``, the replica
    that runs it cannot be heard); they are read from the store every ``poll_ms``."""

    reason: str
    poll_ms: int


@dataclass(frozen=True, kw_only=True)
class Recovered:
    """After ``Degraded``: the session's events come live again."""


Notice = Degraded | Recovered
"""How a stream's events reach it changed; the stream goes on."""

StreamItem = LoggedEvent | ResyncRequired | Evicted | ShuttingDown | Degraded | Recovered | None

DIRECT_WRITER = "gateway.direct_writer"
"""ASGI scope extension under which the server offers a ``RawWriter`` for the connection."""


class RawWriter(Protocol):
    """A streaming response's connection, written from the task that publishes events.

    ``frame`` wraps a payload the way this connection carries it (an HTTP chunk, a WebSocket
    text frame): connections of one ``kind`` frame alike, so a batch is framed once for all
    of them. ``write`` puts framed bytes on the socket now, or returns False when the
    connection cannot take them (its buffer is full, it is closing, its response is not
    streaming).
    """

    kind: str

    def frame(self, payload: bytes) -> bytes: ...

    def write(self, data: bytes) -> bool: ...


@dataclass(eq=False, slots=True)
class DirectWrite:
    """How a transport puts a batch of live events on its connection without its task.

    ``encode`` makes the batch's bytes (SSE messages, WebSocket frames), the same for every
    connection of ``writer.kind``."""

    writer: RawWriter
    encode: Callable[[Sequence[LoggedEvent]], bytes]


@dataclass(eq=False)
class Subscriber:
    queue: asyncio.Queue[LoggedEvent | None]
    baseline: int
    """The newest seq when the subscription opened: older events are history it may replay
    at its own pace; only events appended since count towards its lag."""
    transport: str = "internal"
    """What the events are delivered over (``sse``, ``ws``, ``runs``), for the metrics."""
    holder: Issuer | None = None
    """The key the subscriber counts for (``limits.max_key_share``); None: internal."""
    cursor: int = 0
    """The last seq handed to the client's transport."""
    lag: Histogram | None = None
    """This transport's delivery-lag histogram, once looked up."""
    overflowed: bool = False
    evicted: bool = False
    ended: str | None = None
    """Why the stream was ended from outside (``end``), as its ``evicted`` frame says."""
    stopping: ShuttingDown | None = None
    direct: DirectWrite | None = None
    """Set by a transport that can take live events on its connection from the publisher."""
    parked: bool = False
    """Its task waits on an empty queue, having written everything up to ``cursor``: a live
    batch may go straight to the connection (app/runtime/delivery.py)."""
    notices: list[tuple[int, Notice]] = field(default_factory=list)
    """Notices still to send, each after the events up to its seq."""

    def wake(self) -> None:
        try:
            self.queue.put_nowait(None)
        except asyncio.QueueFull:
            self.overflowed = True  # a full queue is read before the flags are looked at

    def tell(self, notice: Notice, *, after: int) -> None:
        """Send ``notice`` after the events up to seq ``after`` (those delivered before it)
        and before the later ones; nothing goes straight to the connection meanwhile."""
        self.notices.append((after, notice))
        self.parked = False
        self.wake()


@dataclass(eq=False)
class Channel:
    """One session's live side: its numbering as the event log sees it, and its subscribers."""

    session_id: str
    last_seq: int
    """The newest stored (and published) seq: what readers may rely on."""
    first_seq: int
    """The oldest seq that may still be stored (lower after another process pruned)."""
    assigned_seq: int = -1
    """The newest seq handed out; ahead of ``last_seq`` while events wait for their commit."""
    failure: Exception | None = None
    """A write of events nobody waited for failed: raised by the next ``append``."""
    degraded: Degraded | None = None
    """The channel's events do not come live now; a subscriber opened meanwhile is told."""
    subscribers: set[Subscriber] = field(default_factory=set)
    closed: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.assigned_seq = max(self.assigned_seq, self.last_seq)


class Feed(Protocol):
    """What a subscription reads from and reports to (app/runtime/delivery.py)."""

    @property
    def queue_size(self) -> int: ...

    async def page(self, session_id: str, *, after: int, limit: int) -> list[LoggedEvent]: ...

    def delivered(self, subscriber: Subscriber, event: LoggedEvent) -> None: ...

    def unregister(self, channel: Channel, subscriber: Subscriber) -> None: ...


class Subscription:
    """A registered subscriber: iterate it once, by item or by ``batches()``; ``release()``
    unregisters (idempotent).

    Registration happens when the subscription is opened, so caps are checked and counted
    before a response starts; iterating to the end, or ``release()``, gives the slot back.
    """

    def __init__(
        self,
        feed: Feed,
        session_id: str,
        channel: Channel,
        subscriber: Subscriber,
        *,
        after: int,
        heartbeat_s: float | None,
    ) -> None:
        self._feed = feed
        self._session_id = session_id
        self._channel = channel
        self._subscriber = subscriber
        self._after = after
        self._heartbeat_s = heartbeat_s
        self._done = False
        """The stream ended (the session closed) or was stopped (eviction, shutdown)."""
        self._batches = self._read()
        self._iterator = self._items()

    def __aiter__(self) -> AsyncIterator[StreamItem]:
        return self._iterator

    def batches(self) -> AsyncIterator[list[StreamItem]]:
        """The items in the groups they became available in (a replayed page, whatever was
        queued when the reader came back): a transport writes each group at once."""
        return self._batches

    def release(self) -> None:
        self._feed.unregister(self._channel, self._subscriber)

    def write_directly(self, direct: DirectWrite) -> None:
        """Let live events go straight to the connection while this subscription keeps up
        (call once the response is streaming): no task wakes per event, as when a relay
        writes one line to every socket. Replays, catching up, control frames and a
        connection whose buffer is full still go through the subscription's own task."""
        self._subscriber.direct = direct

    def end(self, reason: str) -> None:
        """End the stream now with an ``Evicted`` frame saying ``reason`` (the key it was
        opened with is no longer valid): nothing more goes to the connection, not even
        directly."""
        subscriber = self._subscriber
        subscriber.ended = reason
        subscriber.direct = None
        subscriber.wake()

    async def aclose(self) -> None:
        """Stop iterating (for a consumer that leaves before the end) and release."""
        await self._iterator.aclose()
        await self._batches.aclose()
        self.release()

    def _stop(self) -> Evicted | ShuttingDown | None:
        subscriber = self._subscriber
        if subscriber.stopping is not None:
            return subscriber.stopping
        if subscriber.ended is not None:
            return Evicted(last_seq_sent=subscriber.cursor, reason=subscriber.ended)
        if subscriber.evicted:
            return Evicted(last_seq_sent=subscriber.cursor, reason="lagging")
        return None

    async def _items(self) -> AsyncGenerator[StreamItem, None]:
        async for batch in self._batches:
            for item in batch:
                yield item

    async def _read(self) -> AsyncGenerator[list[StreamItem], None]:
        subscriber = self._subscriber
        subscriber.cursor = self._after
        try:
            while not self._done:
                # A fresh queue before the replay: whatever is appended from now on is either
                # in the store when the replay reads it or in this queue, or both.
                subscriber.queue = asyncio.Queue(self._feed.queue_size)
                subscriber.overflowed = False
                async for batch in self._replay():
                    yield batch
                if self._done:
                    return
                async for batch in self._follow():
                    yield batch
                if not self._done:
                    log.debug(
                        "subscriber of %s fell behind at %d; catching up",
                        self._session_id,
                        subscriber.cursor,
                    )
        finally:
            self.release()

    async def _replay(self) -> AsyncGenerator[list[StreamItem], None]:
        """What the store has past the cursor, a page at a time."""
        channel, subscriber = self._channel, self._subscriber
        while True:
            if (stop := self._stop()) is not None:
                self._done = True
                yield [stop]
                return
            cursor, head = subscriber.cursor, channel.last_seq
            page = await self._feed.page(self._session_id, after=cursor, limit=REPLAY_PAGE)
            batch: list[StreamItem] = []
            first = page[0].seq if page else head + 1
            if first > cursor + 1 and (page or cursor < head):
                log.info(
                    "subscriber of %s asked for events after %d; oldest kept is %d",
                    self._session_id,
                    cursor,
                    first,
                )
                batch.append(ResyncRequired(first_seq=first, after=cursor))
                subscriber.cursor = first - 1
            if page:
                batch += self._placed(page) if subscriber.notices else page
                subscriber.cursor = page[-1].seq
            if batch:
                yield batch
            if len(page) < REPLAY_PAGE:
                return

    async def _follow(self) -> AsyncGenerator[list[StreamItem], None]:
        """Live events from the queue, everything queued at once, until the queue overflowed
        (the rest is then read from the store), the stream stops, or the session closed."""
        channel, subscriber = self._channel, self._subscriber
        queue = subscriber.queue
        while not subscriber.overflowed:
            if (stop := self._stop()) is not None:
                self._done = True
                yield [stop]
                return
            if subscriber.notices and (due := self._due()):
                yield due
                continue
            if channel.closed.is_set() and queue.empty():
                self._done = subscriber.cursor >= channel.last_seq
                return  # ended, or the tail is in the store
            subscriber.parked = queue.empty()
            try:
                queued = [await next_item(queue, self._heartbeat_s)]
            except TimeoutError:
                yield [None]
                continue
            finally:
                subscriber.parked = False
            while not queue.empty():
                queued.append(queue.get_nowait())
            batch: list[StreamItem] = []
            oldest: LoggedEvent | None = None
            for item in queued:
                if item is None or item.seq <= subscriber.cursor:
                    continue
                subscriber.cursor = item.seq
                oldest = oldest or item
                batch.append(item)
            if oldest is not None:
                self._feed.delivered(subscriber, oldest)
                yield self._placed(batch) if subscriber.notices else batch

    def _placed(self, items: Sequence[StreamItem]) -> list[StreamItem]:
        """``items`` with the notices due among their events, each before the first event
        delivered after it."""
        notices = self._subscriber.notices
        placed: list[StreamItem] = []
        for item in items:
            if isinstance(item, LoggedEvent):
                while notices and notices[0][0] < item.seq:
                    placed.append(notices.pop(0)[1])
            placed.append(item)
        return placed

    def _due(self) -> list[StreamItem]:
        """The notices whose events were all sent, taken."""
        notices, cursor = self._subscriber.notices, self._subscriber.cursor
        due: list[StreamItem] = []
        while notices and notices[0][0] <= cursor:
            due.append(notices.pop(0)[1])
        return due

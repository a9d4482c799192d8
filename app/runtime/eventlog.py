"""The event log: numbers each session's events, persists them, then fans them out.

An event is written to the store before any subscriber sees it, so a client that reconnects
with ``Last-Event-ID`` / ``after`` always finds in the store what it missed. A subscription
first registers its live queue, then replays the store, then follows the queue, dropping
what the replay already delivered; a subscriber that falls behind by a whole queue is not
waited for: its queue is dropped and it catches up from the store, so it loses nothing and
slows no one.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from app.events import EventData, EventType
from app.store.repository import EventRecord, Store

log = logging.getLogger(__name__)

REPLAY_PAGE = 500


@dataclass(frozen=True, kw_only=True)
class LoggedEvent:
    """One persisted event with its wire form, encoded once for every subscriber."""

    seq: int
    session_id: str
    type: EventType
    turn_id: str | None
    json: str

    @classmethod
    def from_record(cls, record: EventRecord) -> LoggedEvent:
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
        )


@dataclass(eq=False)
class _Subscriber:
    queue: asyncio.Queue[LoggedEvent | None]
    overflowed: bool = False


@dataclass
class _Channel:
    last_seq: int
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    subscribers: set[_Subscriber] = field(default_factory=set)
    closed: asyncio.Event = field(default_factory=asyncio.Event)


class EventLog:
    """Per-session numbering, persistence and fan-out of events."""

    def __init__(
        self,
        store: Store,
        *,
        queue_size: int = 1000,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._store = store
        self._queue_size = queue_size
        self._clock = clock
        self._channels: dict[str, _Channel] = {}
        self._channels_lock = asyncio.Lock()

    async def _channel(self, session_id: str) -> _Channel:
        channel = self._channels.get(session_id)
        if channel is None:
            async with self._channels_lock:
                channel = self._channels.get(session_id)
                if channel is None:
                    last = await self._store.last_event_seq(session_id)
                    channel = self._channels[session_id] = _Channel(last_seq=last)
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
        would reuse its seq).
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
            await self._store.insert_event(record)
            channel.last_seq = record.seq
            event = LoggedEvent.from_record(record)
            for subscriber in channel.subscribers:
                if subscriber.overflowed:
                    continue
                try:
                    subscriber.queue.put_nowait(event)
                except asyncio.QueueFull:
                    subscriber.overflowed = True
        return event

    async def page(self, session_id: str, *, after: int, limit: int) -> list[LoggedEvent]:
        records = await self._store.events_after(session_id, after=after, limit=limit)
        return [LoggedEvent.from_record(r) for r in records]

    async def subscribe(
        self, session_id: str, *, after: int, heartbeat_s: float | None = None
    ) -> AsyncIterator[LoggedEvent | None]:
        """Every event with ``seq > after``, in order, none twice; ends when the log closes.

        With ``heartbeat_s``, yields ``None`` after that long without an event (keep-alive).
        """
        channel = await self._channel(session_id)
        cursor = after
        while True:
            subscriber = _Subscriber(queue=asyncio.Queue(self._queue_size))
            channel.subscribers.add(subscriber)
            try:
                while True:  # replay what the store has past the cursor
                    page = await self.page(session_id, after=cursor, limit=REPLAY_PAGE)
                    for event in page:
                        cursor = event.seq
                        yield event
                    if len(page) < REPLAY_PAGE:
                        break
                while not subscriber.overflowed:
                    if channel.closed.is_set() and subscriber.queue.empty():
                        if cursor >= channel.last_seq:
                            return
                        break  # the tail is in the store
                    try:
                        item = await asyncio.wait_for(subscriber.queue.get(), heartbeat_s)
                    except TimeoutError:
                        yield None
                        continue
                    if item is None or item.seq <= cursor:
                        continue
                    cursor = item.seq
                    yield item
            finally:
                channel.subscribers.discard(subscriber)
            log.debug("subscriber of %s fell behind at seq %d; catching up", session_id, cursor)

    async def close(self, session_id: str) -> None:
        """End every subscription of the session once it has delivered the last event."""
        channel = await self._channel(session_id)
        channel.closed.set()
        for subscriber in channel.subscribers:
            try:
                subscriber.queue.put_nowait(None)
            except asyncio.QueueFull:
                subscriber.overflowed = True

    def subscriber_count(self, session_id: str | None = None) -> int:
        channels = (
            self._channels.values()
            if session_id is None
            else [c for s, c in self._channels.items() if s == session_id]
        )
        return sum(len(c.subscribers) for c in channels)

"""The event log's side of several replicas: publishing what this replica stored, and
mirroring into local channels the sessions another replica runs.

The owner of a session publishes each stored batch to Redis after its commit, in commit order,
without waiting (a batch Redis loses is read from the store by the followers). A replica with
subscribers of a session it does not hold follows it (app/runtime/remote.py: Redis, with the
store filling gaps) and hands each batch to the one delivery step (app/runtime/delivery.py),
as the owner does with what it stores: lag eviction, queues and direct writes, overflow, resync,
the delivery-lag metric and shutdown hold for the subscribers of remote sessions unchanged.

While Redis cannot be reached, a follower goes on from the store alone:

    following live ──Redis unreachable──► Degraded to the subscribers (once)
        ▲                                  read the store every MIRROR_CHECK_S, delivering each
        │                                  new event once, in order, through the same step;
        │                                  PING Redis after each read
        └──── Recovered to the subscribers ◄── Redis answers: subscribe, replay, follow live

The owner meanwhile keeps storing its session's events; the batches it could not publish are
dropped (the followers read them from the store). Redis's outage itself is logged once, by
``app.outages.REDIS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

import orjson

from app.cluster.redis import ping
from app.errors import ClusterUnavailable
from app.runtime.cluster import Cluster
from app.runtime.delivery import Delivery
from app.runtime.remote import Page, Pruned, Sequenced, follow, stored_after
from app.runtime.subscription import Channel, Degraded, LoggedEvent, Recovered
from app.runtime.supervision import Failures
from app.store.interface import Storage

log = logging.getLogger(__name__)

MIRROR_CHECK_S = 2.0
"""How long a replica following another's session trusts a quiet Redis before it asks the
store (a batch pub/sub lost), waits before following again after a failure, and, while Redis
cannot be reached, between two reads of the store."""
REDIS_UNREACHABLE = Degraded(reason="redis_unreachable", poll_ms=int(MIRROR_CHECK_S * 1000))


def _logged(session_id: str, event: Sequenced, received: float) -> LoggedEvent:
    """The event as the delivery step takes it, timed from its arrival here (the owner's
    clock is not this one's)."""
    if isinstance(event, LoggedEvent):
        event.appended_at = received
        return event
    envelope = orjson.loads(event.json)
    return LoggedEvent(
        seq=event.seq,
        session_id=session_id,
        type=envelope["type"],
        turn_id=envelope.get("turn_id"),
        json=event.json,
        appended_at=received,
    )


class Replicas:
    """Publishing and mirroring for one event log."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        store: Storage,
        delivery: Delivery,
        close: Callable[[str], Awaitable[None]],
    ) -> None:
        self._cluster = cluster
        self._store = store
        self._delivery = delivery
        self._close = close
        self._mirrors: dict[str, asyncio.Task[None]] = {}
        self._publishing: asyncio.Queue[tuple[str, list[tuple[int, str]]]] | None = None
        self._publisher: asyncio.Task[None] | None = None

    def publish(self, session_id: str, events: list[tuple[int, str]]) -> None:
        """Publish a stored batch to the other replicas, in commit order, without waiting."""
        if self._publishing is None:
            self._publishing = asyncio.Queue()
        self._publishing.put_nowait((session_id, events))
        if self._publisher is None or self._publisher.done():
            self._publisher = asyncio.create_task(self._publish_loop(), name="event-fanout")

    async def _publish_loop(self) -> None:
        assert self._publishing is not None
        queue = self._publishing
        while True:
            session_id, events = await queue.get()
            try:
                await self._cluster.fanout.publish(session_id, events)
            except ClusterUnavailable:
                # Redis away (logged once, as an outage): the followers read these batches,
                # and the ones queued behind them, from the store.
                dropped = 1
                while not queue.empty():
                    queue.get_nowait()
                    dropped += 1
                log.debug("dropped %d batches Redis could not take", dropped)
            except Exception as exc:
                log.warning("could not publish events of %s to the replicas: %s", session_id, exc)

    def follow(self, channel: Channel) -> None:
        """Feed the channel from the replica that owns the session (through Redis and the
        store), while it has subscribers here and this replica does not own it."""
        session_id = channel.session_id
        if self._cluster.holds(session_id):
            return
        running = self._mirrors.get(session_id)
        if running is None or running.done():
            self._mirrors[session_id] = asyncio.create_task(
                self._mirror(channel), name=f"mirror:{session_id}"
            )

    async def stop_following(self, session_id: str) -> None:
        """This replica holds the session now: its own appends feed the channel."""
        mirror = self._mirrors.pop(session_id, None)
        if mirror is not None:
            mirror.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await mirror

    def cancel(self) -> None:
        for task in [*self._mirrors.values(), self._publisher]:
            if task is not None:
                task.cancel()
        self._mirrors.clear()

    def _following(self, channel: Channel) -> bool:
        return bool(channel.subscribers) and not self._cluster.holds(channel.session_id)

    async def _mirror(self, channel: Channel) -> None:
        session_id = channel.session_id
        delivery = self._delivery
        failures = Failures(log, f"following {session_id} on its owner")

        async def page(after: int, limit: int) -> list[LoggedEvent]:
            return await delivery.page(session_id, after=after, limit=limit)

        degraded = False
        try:
            while self._following(channel):
                try:
                    # What the owner wrote before this replica followed is history to the
                    # subscribers here, as it is to the owner's: it does not count as lag.
                    _, last = await self._store.event_bounds(session_id)
                    delivery.count_lag_after(channel, last)
                    async with self._cluster.fanout.tail(session_id) as tail:
                        batches = follow(
                            tail, page, after=channel.last_seq, reconcile_s=MIRROR_CHECK_S
                        )
                        async for batch in batches:
                            failures.worked()
                            if not await self._hand_over(channel, batch):
                                return
                except Pruned as pruned:
                    delivery.advance(channel, first_seq=pruned.first_seq)
                except ClusterUnavailable:
                    if not degraded:
                        degraded = True
                        delivery.notify(channel, REDIS_UNREACHABLE)
                    if not await self._from_store(channel, page, failures):
                        return
                    degraded = False
                    delivery.notify(channel, Recovered())
                except Exception as exc:  # the store away: try again shortly
                    failures.failed(exc, f"trying again in {MIRROR_CHECK_S:g} s")
                    await asyncio.sleep(MIRROR_CHECK_S)
        finally:
            if degraded and channel.subscribers:  # this replica runs the session now
                delivery.notify(channel, Recovered())

    async def _from_store(self, channel: Channel, page: Page, failures: Failures) -> bool:
        """While Redis cannot be reached: deliver what the store has past the channel's last
        seq every ``MIRROR_CHECK_S``, until Redis answers (True) or following ends (False)."""
        while self._following(channel):
            try:
                async for batch in stored_after(page, after=channel.last_seq):
                    if not await self._hand_over(channel, batch):
                        return False
                failures.worked()
            except Pruned as pruned:
                self._delivery.advance(channel, first_seq=pruned.first_seq)
                continue
            except Exception as exc:  # the store away too: try both again shortly
                failures.failed(exc, f"trying again in {MIRROR_CHECK_S:g} s")
            await asyncio.sleep(MIRROR_CHECK_S)
            try:
                await ping(self._cluster.redis)
            except ClusterUnavailable:
                continue
            except Exception as exc:  # answered, but not as it should: keep to the store
                failures.failed(exc, "reading the store meanwhile")
                continue
            return True
        return False

    async def _hand_over(self, channel: Channel, batch: list[Sequenced]) -> bool:
        """Deliver the batch's events past the channel's last seq (closing the channel after
        ``session.closed``); False once following should stop (no subscriber left, or this
        replica runs the session now)."""
        session_id = channel.session_id
        received = time.monotonic()
        fresh = [
            _logged(session_id, event, received) for event in batch if event.seq > channel.last_seq
        ]
        if fresh:
            self._delivery.deliver(channel, fresh)
        if not self._following(channel):
            return False
        if any(e.json.find('"type":"session.closed"') != -1 for e in fresh):
            await self._close(session_id)
        return True

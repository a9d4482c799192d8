"""Following a session whose events another replica writes: store first, then the tail.

The owner stores each batch, then publishes it (``app.cluster.fanout``). A follower on another
replica must see every event once, in order, although pub/sub may lose a message: so it
subscribes *before* it reads the store, and treats the tail as a hint backed by the store:

    subscribe ── replay the store from the cursor ── follow the tail:
        an event at or below the cursor          dropped (the replay had it)
        an event past a gap                      the gap is read from the store first
        no message for ``reconcile_s``           the store is asked once (a lost last batch)

Between subscribing and the end of the replay, events can arrive both ways; the cursor keeps
each once. The store is the truth: a follower never yields an event it could not find there
in order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Protocol

from app.cluster.fanout import Tail

PAGE = 500
"""Events read from the store per page while replaying or filling a gap."""
RECONCILE_S = 5.0
"""How long a quiet tail is trusted before the store is asked whether it missed a batch."""


class Sequenced(Protocol):
    @property
    def seq(self) -> int: ...

    @property
    def json(self) -> str: ...


class Pruned(Exception):
    """The events after the cursor are no longer stored; the oldest kept is ``first_seq``
    (the caller resynchronises its reader, as for a local subscriber)."""

    def __init__(self, first_seq: int) -> None:
        super().__init__(f"events before {first_seq} are no longer kept")
        self.first_seq = first_seq


Page = Callable[[int, int], Awaitable[Sequence[Sequenced]]]
"""``page(after, limit)``: up to ``limit`` stored events with ``seq > after``, oldest first."""


async def stored_after(page: Page, *, after: int) -> AsyncIterator[list[Sequenced]]:
    """Every event the store has with ``seq > after``, a page at a time, oldest first (never an
    empty page); raises ``Pruned`` when the events right after ``after`` are no longer kept."""
    cursor = after
    while True:
        events = await page(cursor, PAGE)
        if events and events[0].seq > cursor + 1:
            raise Pruned(events[0].seq)
        if events:
            cursor = events[-1].seq
            yield list(events)
        if len(events) < PAGE:
            return


async def follow(
    tail: Tail, page: Page, *, after: int, reconcile_s: float = RECONCILE_S
) -> AsyncIterator[list[Sequenced]]:
    """Every event with ``seq > after``, once and in order: the store, then the live tail.

    Yields them in the batches they came in (a stored page, the new events of a published
    message), never empty, so the caller delivers each at once as the owner does. ``tail``
    must be subscribed before this is called. Runs until the caller stops; raises ``Pruned``
    when the events after the cursor are no longer stored, and ``ClusterUnavailable`` when
    Redis cannot be reached (the caller may go on from the store: ``stored_after``)."""
    cursor = after

    async def from_store() -> AsyncIterator[list[Sequenced]]:
        nonlocal cursor
        async for events in stored_after(page, after=cursor):
            cursor = events[-1].seq
            yield events

    async for batch in from_store():
        yield batch
    while True:
        published = await tail.next(reconcile_s)
        if published is None:
            async for batch in from_store():
                yield batch
            continue
        fresh: list[Sequenced] = []
        for event in published:
            if event.seq <= cursor:
                continue
            if event.seq > cursor + 1:
                if fresh:
                    yield fresh
                    fresh = []
                async for stored in from_store():  # the gap, and whatever follows it
                    yield stored
                if event.seq <= cursor:
                    continue
            if event.seq == cursor + 1:
                cursor = event.seq
                fresh.append(event)
        if fresh:
            yield fresh

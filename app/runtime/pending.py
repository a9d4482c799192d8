"""What the event log's writer works with: an event waiting for its commit, how its appender
is told, and the outbox whose messages are stored in the events' own transaction."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from app.records import EventRecord
from app.runtime.subscription import Channel, LoggedEvent
from app.store.outbox import OutboxMessage


class Outbox(Protocol):
    """The webhook messages a batch of events makes, stored in the events' own transaction
    (app/webhooks/outbox.py); ``stored`` is told once they are committed."""

    def messages(self, records: Sequence[EventRecord]) -> list[OutboxMessage]: ...

    def stored(self, messages: Sequence[OutboxMessage]) -> None: ...


@dataclass(eq=False)
class Pending:
    """An event numbered and waiting for the writer's next commit."""

    channel: Channel
    record: EventRecord
    event: LoggedEvent
    done: asyncio.Future[LoggedEvent] | None
    """Resolved once stored (None: the appender did not wait)."""
    trace: object | None = None
    """The appender's trace context (tracing on, inside a trace): its write is a span there."""


def retrieve(future: asyncio.Future[LoggedEvent]) -> None:
    # The appender may have been cancelled: its failure is then nobody's to read.
    if not future.cancelled():
        future.exception()


def settle(
    item: Pending, *, event: LoggedEvent | None = None, error: Exception | None = None
) -> None:
    done = item.done
    if done is None or done.done():
        return
    if error is not None:
        done.set_exception(error)
    elif event is not None:
        done.set_result(event)

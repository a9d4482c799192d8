"""The webhook outbox as the event log writes it: one message per event an endpoint may want,
in the same transaction as the event (``insert_events``), on both engines.

A message is stored whole, its body exactly as it will be signed and sent, so that a crash
between the commit and the send loses nothing, and a message exists only for an event that
was stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxMessage:
    """One webhook message to store with the events of its batch."""

    id: str
    """``msg_…``: the ``webhook-id`` of every attempt at every endpoint."""
    session_id: str | None
    seq: int | None
    """The event it tells of (for ``session.idle``, the turn's terminal event)."""
    type: str
    payload: str
    """The JSON body, as sent."""
    created_at: str
    """Naive UTC text (``stored_time``), as events keep ``at``."""
    endpoint_id: str | None = None
    """The only endpoint it goes to (a test message); None: every endpoint that wants it."""


OutboxRow = tuple[str, str | None, int | None, str, str, str | None, str]
"""``(id, session_id, seq, type, payload, endpoint_id, created_at)``."""

SQLITE_INSERT = (
    "INSERT INTO webhook_messages "
    "(id, session_id, seq, type, payload, endpoint_id, routed, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, 0, ?)"
)
POSTGRES_INSERT = (
    "INSERT INTO webhook_messages "
    "(id, session_id, seq, type, payload, endpoint_id, routed, created_at) "
    "SELECT i, s, q, t, p, e, false, c::timestamp FROM unnest("
    "$1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::text[]"
    ") AS u(i, s, q, t, p, e, c)"
)


def outbox_rows(messages: Sequence[OutboxMessage]) -> list[OutboxRow]:
    return [
        (m.id, m.session_id, m.seq, m.type, m.payload, m.endpoint_id, m.created_at)
        for m in messages
    ]


def outbox_columns(rows: Sequence[OutboxRow]) -> tuple[list[object], ...]:
    """The rows as one array per column (``POSTGRES_INSERT``'s parameters)."""
    return tuple(list(column) for column in zip(*rows, strict=True))

"""The outbox messages a batch of events makes (``EventLog``'s ``Outbox``): one per event of
a type some endpoint wants, and a derived ``session.idle`` after each turn's end.

``session.idle`` means a turn ended and nothing runs: the gateway runs one turn at a time per
session and records the session idle just before it stores the turn's terminal event
(app/runtime/host.py), so every ``turn.completed``, ``turn.failed`` and ``turn.interrupted``
is followed by one, except the interruption of a session being closed (it is not idle, it is
gone: ``session.closed`` tells that). Its ``data`` is ``{session_id, turn_id, seq,
turn_status}``, ``seq`` being the terminal event's.

A message's body is ``{"type", "timestamp", "data"}`` (the Standard Webhooks payload), ``data``
being the event exactly as the event stream carries it, built from the stored text without
being decoded again; ``timestamp`` is the event's time.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Sequence

from app.events import encode_event
from app.observability.webhookmetrics import WebhookMetrics
from app.records import EventRecord
from app.store.outbox import OutboxMessage

TURN_ENDS = {
    "turn.completed": "completed",
    "turn.failed": "failed",
    "turn.interrupted": "interrupted",
}
CLOSING_REASON = "the turn was stopped: session closed"
"""The reason of ``turn.interrupted`` when the session is being deleted (app/runtime/local.py
stops its host with "session closed"; app/runtime/turns.py ``stopped`` words it)."""
IDLE = "session.idle"


def message_id() -> str:
    """A new ``webhook-id``: never reused, free of ``.`` (the signature's separator)."""
    return "msg_" + secrets.token_hex(16)


def rfc3339(stored: str) -> str:
    """An ``at`` as stored (``YYYY-MM-DD HH:MM:SS.ffffff``, UTC) in RFC 3339."""
    return f"{stored[:10]}T{stored[11:26]}Z"


def body(kind: str, stored_at: str, data_json: str) -> str:
    """The payload sent and signed (``kind`` is one of our own dotted type names)."""
    return f'{{"type":"{kind}","timestamp":"{rfc3339(stored_at)}","data":{data_json}}}'


def _idle_after(record: EventRecord) -> bool:
    if record.type != "turn.interrupted":
        return True
    reason: object = json.loads(record.data_json).get("reason")
    return reason != CLOSING_REASON


class WebhookOutbox:
    """Makes the messages of each batch the event log stores (``wanted``: the event types some
    enabled endpoint wants, kept current by the dispatcher); ``stored`` wakes the dispatcher."""

    def __init__(self, *, wake: Callable[[], None], metrics: WebhookMetrics | None) -> None:
        self.wanted: frozenset[str] = frozenset()
        self._wake = wake
        self._metrics = metrics

    def messages(self, records: Sequence[EventRecord]) -> list[OutboxMessage]:
        wanted = self.wanted
        if not wanted:
            return []
        found: list[OutboxMessage] = []
        for r in records:
            if r.type in wanted:
                data = encode_event(
                    seq=r.seq,
                    session_id=r.session_id,
                    turn_id=r.turn_id,
                    attempt=r.attempt,
                    provider=r.provider,
                    at=r.at_text,
                    type=r.type,
                    data_json=r.data_json,
                )
                found.append(self._message(r, r.type, data))
            if r.type in TURN_ENDS and IDLE in wanted and _idle_after(r):
                data = json.dumps(
                    {
                        "session_id": r.session_id,
                        "turn_id": r.turn_id,
                        "seq": r.seq,
                        "turn_status": TURN_ENDS[r.type],
                    },
                    separators=(",", ":"),
                )
                found.append(self._message(r, IDLE, data))
        return found

    @staticmethod
    def _message(record: EventRecord, kind: str, data_json: str) -> OutboxMessage:
        return OutboxMessage(
            id=message_id(),
            session_id=record.session_id,
            seq=record.seq,
            type=kind,
            payload=body(kind, record.at_text, data_json),
            created_at=record.at_text,
        )

    def stored(self, messages: Sequence[OutboxMessage]) -> None:
        if self._metrics is not None:
            for message in messages:
                self._metrics.messages.labels(type=message.type).inc()
        self._wake()

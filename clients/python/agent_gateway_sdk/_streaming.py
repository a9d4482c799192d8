"""What a stream does with each SSE message, and when it reconnects: the part of the sync
and async event streams that does no I/O.

A stream keeps a cursor (the last ``seq`` it yielded) and sends it as ``Last-Event-ID`` on
every reconnect, so the gateway sends exactly what was missed; an event at or below the
cursor is dropped, so none is ever yielded twice. ``evicted`` and a dropped connection
reconnect at once (then backing off), ``shutdown`` after its ``retry_ms``; ``degraded`` and
``recovered`` only change ``degraded``; ``resync_required`` moves the cursor past the gap when
``on_control`` is given, else raises ``EventsSkipped``.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from agent_gateway_sdk._sse import SseMessage
from agent_gateway_sdk.controls import (
    CONTROL_TYPES,
    ControlFrame,
    Degraded,
    Evicted,
    Recovered,
    ResyncRequired,
    Shutdown,
    parse_control,
)
from agent_gateway_sdk.errors import EventsSkipped, UnexpectedResponse
from agent_gateway_sdk.events import Event, parse_event_json

RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})
"""Answers to a reconnect that mean "not now" (a restarting gateway, a proxy before it)."""
MAX_SHUTDOWN_WAIT_S = 30.0

OnControl = Callable[[ControlFrame], object]
StopWhen = Callable[[Event], bool]


@dataclass(frozen=True)
class Deliver:
    event: Event


@dataclass(frozen=True)
class Reconnect:
    delay_s: float


Step = Deliver | Reconnect | None
"""What to do with one message: yield an event, end this connection and reconnect, or
nothing (a duplicate, a notice)."""


class Backoff:
    """Reconnect delays: at once, then 0.25 s doubling to ``cap_s``, with jitter; ``None``
    once ``timeout_s`` has passed without progress (``progress()`` starts it again)."""

    def __init__(self, *, timeout_s: float, cap_s: float = 5.0) -> None:
        self.timeout_s = timeout_s
        self.cap_s = cap_s
        self._failures = 0
        self._since = time.monotonic()

    def progress(self) -> None:
        self._failures = 0
        self._since = time.monotonic()

    def next_delay(self, at_least_s: float = 0.0) -> float | None:
        elapsed = time.monotonic() - self._since
        if elapsed >= self.timeout_s:
            return None
        base = 0.0 if self._failures == 0 else min(self.cap_s, 0.25 * 2 ** (self._failures - 1))
        self._failures += 1
        delay = max(at_least_s, base * (0.8 + 0.4 * random.random()))  # noqa: S311 -- jitter
        return min(delay, self.timeout_s - elapsed)


class StreamState:
    """The cursor and the reading of messages of one logical stream across its connections."""

    def __init__(
        self,
        *,
        after: int | None,
        on_control: OnControl | None,
        stop_when: StopWhen | None,
    ) -> None:
        self.cursor = after
        """The last seq yielded (or the ``after`` the stream started from)."""
        self.degraded = False
        """True between ``degraded`` and ``recovered``: events come late, from the store."""
        self.session_id: str | None = None
        """The session the events belong to (learnt from the first one)."""
        self.ended = False
        self._on_control = on_control
        self._stop_when = stop_when

    def headers(self) -> dict[str, str]:
        """The headers of the next connection: the cursor as ``Last-Event-ID``."""
        headers = {"Accept": "text/event-stream"}
        if self.cursor is not None:
            headers["Last-Event-ID"] = str(self.cursor)
        return headers

    def read(self, message: SseMessage) -> Step:
        if message.event == "message":
            return self._event(message)
        if message.event not in CONTROL_TYPES:
            return None  # a frame a newer gateway sends: not for this SDK
        frame = parse_control(message.event, message.data)
        match frame:
            case ResyncRequired(first_seq=first, after=after):
                if self._on_control is None:
                    raise EventsSkipped(first_seq=first, after=after)
                self.cursor = max(self.cursor or 0, first - 1)
            case Degraded():
                self.degraded = True
            case Recovered():
                self.degraded = False
            case Evicted() | Shutdown():
                pass
        if self._on_control is not None:
            self._on_control(frame)
        if isinstance(frame, Shutdown):
            return Reconnect(min(MAX_SHUTDOWN_WAIT_S, max(0, frame.retry_ms) / 1000))
        if isinstance(frame, Evicted):
            return Reconnect(0.0)
        return None

    def _event(self, message: SseMessage) -> Step:
        try:
            event = parse_event_json(message.data)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise UnexpectedResponse(f"an event this SDK cannot read: {exc}") from exc
        if self.cursor is not None and event.seq <= self.cursor:
            return None
        self.cursor = event.seq
        self.session_id = event.session_id
        if self._stop_when is not None and self._stop_when(event):
            self.ended = True
        return Deliver(event)

"""Delta coalescing: a CLI's stream of tiny text deltas becomes fewer, longer events.

CLIs print a delta every few characters (OpenCode one ``message.part.delta`` per ~2
characters, 150 a second); each one stored, numbered and sent to every subscriber costs the
gateway, the network and the browser far more than its text. The coalescer sits in front of
the event log's numbering:

- the first ``message.delta``, ``reasoning.delta`` or ``tool.output`` after a quiet spell is
  numbered at once (no added latency for the first text);
- later ones of the same item within ``window_s`` of the last one numbered are held and
  joined; the held event is numbered when the window closes, when a delta of another item or
  any other event of the session comes (that one is numbered after it), when the log is
  flushed or closed, or when it reaches ``MAX_HELD_CHARS``.

Nothing is dropped or reordered, and coalescing happens before an event is numbered and
stored, so a replay shows exactly what live subscribers saw. ``window_s = 0`` turns it off.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import orjson

from app.events import StreamedText, item_of, joined

MAX_HELD_CHARS = 64 * 1024
"""A held event this long is numbered without waiting for its window to close."""

T = TypeVar("T")
"""What the log numbers a released event into (its session's channel)."""


Origin = tuple[str | None, int | None, str | None]
"""``(turn_id, attempt, provider)`` of a streamed event: only events of one origin and item
are joined (a plain tuple: one is made per delta)."""


def encoded_size(data: StreamedText) -> int:
    """The length of ``data.model_dump_json()`` or a little more (its text escaped as JSON,
    counted in bytes), without encoding the event."""
    return len(orjson.dumps(data.text)) + len(item_of(data)) + 25


@dataclass(eq=False, slots=True)
class _Held(Generic[T]):
    target: T
    origin: Origin
    item: str
    first: StreamedText
    texts: list[str]
    chars: int
    timer: asyncio.TimerHandle | None = None


Release = Callable[[T, StreamedText, Origin], None]
"""Number one (joined) event now, in the session's order."""


@dataclass(eq=False)
class Coalescer(Generic[T]):
    """Holds each session's pending joined delta; ``release`` numbers one."""

    window_s: float
    release: Release[T]
    clock: Callable[[], float] = time.monotonic
    _held: dict[str, _Held[T]] = field(default_factory=dict)
    _last: dict[str, float] = field(default_factory=dict)
    """When each session's last streamed event was numbered."""

    def add(self, session_id: str, target: T, data: StreamedText, origin: Origin) -> bool:
        """Hold ``data`` (True), or say it is to be numbered now (False: the caller numbers
        it, after whatever was held of the session has been)."""
        if self.window_s <= 0:
            return False
        held = self._held.get(session_id)
        item = item_of(data)
        if held is not None:
            if type(held.first) is type(data) and held.item == item and held.origin == origin:
                held.texts.append(data.text)
                held.chars += len(data.text)
                if held.chars >= MAX_HELD_CHARS:
                    self.flush(session_id)
                return True
            self.flush(session_id)
        now = self.clock()
        last = self._last.get(session_id)
        if last is None or now - last >= self.window_s:
            self._last[session_id] = now
            return False
        held = _Held(target, origin, item, data, [data.text], len(data.text))
        held.timer = asyncio.get_running_loop().call_later(
            last + self.window_s - now, self.flush, session_id
        )
        self._held[session_id] = held
        return True

    def flush(self, session_id: str) -> None:
        """Number the session's held event, if any (before anything else of it is)."""
        held = self._held.pop(session_id, None)
        if held is None:
            return
        if held.timer is not None:
            held.timer.cancel()
        self._last[session_id] = self.clock()
        self.release(held.target, joined(held.first, held.texts), held.origin)

    def flush_all(self) -> None:
        for session_id in list(self._held):
            self.flush(session_id)

    def forget(self, session_id: str) -> None:
        """The session's stream ended: number what is held and drop its timing."""
        self.flush(session_id)
        self._last.pop(session_id, None)

    @property
    def holding(self) -> int:
        return len(self._held)

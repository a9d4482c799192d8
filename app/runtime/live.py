"""The in-memory side of sessions, and the cap on the CLI processes they hold.

``LocalSessions`` (app/runtime/local.py) keeps one ``LiveSession`` per session that has run
a turn; ``make_room`` keeps per-session CLI processes within ``limits.max_live_processes`` and
each key within its share of them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.providers.base import Provider, ProviderSession
from app.runtime.approvals import ApprovalBroker
from app.runtime.coordinator import TurnCoordinator
from app.runtime.figures import TurnTiming
from app.runtime.shares import Holder, SharedCap

log = logging.getLogger(__name__)


@dataclass(eq=False)
class LiveSession:
    """The in-memory side of a session that has run (or is running) a turn."""

    session_id: str
    provider: str
    handle: ProviderSession
    approvals: ApprovalBroker
    thread_id: str | None
    holder: Holder
    """The key that owns the session: its process counts for that key (``limits.max_key_share``)."""
    model: str | None = None
    """The model the session named (None: the CLI's default), for usage metrics."""
    turn_task: asyncio.Task[None] | None = None
    turn_id: str | None = None
    last_active: float = field(default_factory=time.monotonic)
    stop_reason: str = "interrupted by the client"
    busy: bool = False
    """A turn is running; cleared just before its terminal event is published."""
    coordinator: TurnCoordinator | None = None
    """The running turn's coordinator (attempts, retry waits, interrupts)."""
    timing: TurnTiming | None = None
    """The running turn's measurement marks (app/runtime/figures.py)."""


def owns_process(providers: Mapping[str, Provider], live: LiveSession) -> bool:
    """Whether the session's provider runs one CLI process per session."""
    provider = providers.get(live.provider)
    return provider is not None and not provider.capabilities.shared_process


async def make_room(
    live: LiveSession,
    sessions: Iterable[LiveSession],
    *,
    providers: Mapping[str, Provider],
    cap: SharedCap,
) -> None:
    """Keep per-session CLI processes within ``limits.max_live_processes`` and each key
    within its share of them (app/runtime/shares.py).

    A turn of a session without a live process will spawn one; it counts for the key that
    owns the session. A key at its share has its own longest-idle processes closed first,
    then at the cap (or, for a key that is not an admin key, at the admin reserve) anyone's
    (they resume from their bindings later); when too few are idle, 429
    ``key_share_exceeded`` or 503 ``at_capacity`` before anything is spawned.
    """
    if not owns_process(providers, live) or live.handle.process is not None:
        return
    holders = [
        other
        for other in sessions
        if other is not live
        and owns_process(providers, other)
        and (other.busy or other.handle.process is not None)
    ]
    mine = [h for h in holders if h.holder.key == live.holder.key]
    closing = _idlest(mine, len(mine) + 1 - cap.per_key) if cap.divided else []
    if closing is None:
        raise cap.over_share(live.holder, held=len(mine))
    others = [h for h in holders if h not in closing]
    more = _idlest(others, len(others) + 1 - cap.limit_for(live.holder))
    if more is None:
        raise cap.full(live.holder, total=len(holders), held=len(mine))
    for other in [*closing, *more]:
        log.info("closing the idle CLI of session %s to make room", other.session_id)
        await other.handle.suspend()


def _idlest(holders: list[LiveSession], count: int) -> list[LiveSession] | None:
    """The ``count`` longest-idle of ``holders`` with a process to close (none when
    ``count`` <= 0), or None when fewer are idle."""
    if count <= 0:
        return []
    idle = sorted(
        (h for h in holders if not h.busy and h.handle.process is not None),
        key=lambda h: h.last_active,
    )
    return idle[:count] if len(idle) >= count else None

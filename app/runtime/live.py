"""The in-memory side of sessions, and the cap on the CLI processes they hold.

``SessionManager`` (app/runtime/sessions.py) keeps one ``LiveSession`` per session that has run
a turn; ``make_room`` keeps per-session CLI processes within ``limits.max_live_processes``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.errors import AtCapacity
from app.providers.base import Provider, ProviderSession
from app.runtime.approvals import ApprovalBroker
from app.runtime.coordinator import TurnCoordinator
from app.runtime.figures import TurnTiming

log = logging.getLogger(__name__)

CAPACITY_RETRY_AFTER_S = 5.0
"""The ``Retry-After`` of a 503 ``at_capacity`` when every CLI process is busy."""


@dataclass(eq=False)
class LiveSession:
    """The in-memory side of a session that has run (or is running) a turn."""

    session_id: str
    provider: str
    handle: ProviderSession
    approvals: ApprovalBroker
    thread_id: str | None
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
    max_live_processes: int,
) -> None:
    """Keep per-session CLI processes within ``limits.max_live_processes``.

    A turn of a session without a live process will spawn one. At the cap, the longest-idle
    sessions' processes are closed first (they resume from their bindings later); when
    too few are idle, 503 ``at_capacity`` before anything is spawned.
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
    excess = len(holders) + 1 - max_live_processes
    if excess <= 0:
        return
    idle = sorted(
        (h for h in holders if not h.busy and h.handle.process is not None),
        key=lambda h: h.last_active,
    )
    if len(idle) < excess:
        raise AtCapacity(
            f"all {len(holders)} CLI processes this gateway may run "
            "(limits.max_live_processes) are busy; retry later",
            retry_after_s=CAPACITY_RETRY_AFTER_S,
        )
    for other in idle[:excess]:
        log.info("closing the idle CLI of session %s to make room", other.session_id)
        await other.handle.suspend()

"""The in-memory side of sessions, and the cap on the CLI processes they hold.

A session that has run a turn has one ``SessionHost`` (app/runtime/host.py), which lends the
turn it runs a ``TurnContext``; ``make_room`` keeps per-session CLI
processes within ``limits.max_live_processes`` and each key within its share of them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import JsonValue

from app.providers.base import ProcessInfo, Provider, ProviderSession, SessionSpec, ThreadFork
from app.records import BindingRecord, SessionRecord
from app.runtime.approvals import ApprovalBroker
from app.runtime.commands import Issuer
from app.runtime.figures import TurnTiming
from app.runtime.shares import SharedCap

log = logging.getLogger(__name__)


def session_spec(row: SessionRecord, binding: BindingRecord | None) -> SessionSpec:
    """What the session's provider opens it with: its workspace, mode and model, the thread
    of its binding, or for a fork the thread its CLI forks as it first runs."""
    start = row.fork_start or {}
    forked, at = start.get("thread"), start.get("at")
    return SessionSpec(
        session_id=row.id,
        workspace=Path(row.workspace),
        model=row.model,
        approval_mode=row.approval_mode,  # type: ignore[arg-type]
        thread_id=binding.thread_id if binding else None,
        thread_bound_at=binding.created_at if binding else None,
        git_dir=None if row.git_dir is None else Path(row.git_dir),
        fork_from=ThreadFork(thread_id=forked, at=at if isinstance(at, str) else None)
        if isinstance(forked, str)
        else None,
    )


@dataclass(eq=False)
class TurnContext:
    """What a session's running turn, and failover, see of it: its provider, the provider's
    session handle, its approvals and its CLI thread. Its host (app/runtime/host.py) makes it
    and alone moves it to another provider (failover returns where to); the rest of the live
    session (the turn's task and coordinator, whether it is busy, when it was last active, why
    it is stopped) is the host's alone."""

    session_id: str
    provider: str
    handle: ProviderSession
    approvals: ApprovalBroker
    thread_id: str | None
    model: str | None = None
    """The model the session named (None: the CLI's default), for usage metrics."""
    timing: TurnTiming | None = None
    """The running turn's measurement marks (app/runtime/figures.py)."""
    workspace: Path | None = None
    """The session's workspace, recorded at each turn's start and end."""
    fork_start: dict[str, JsonValue] | None = None
    """A fork's ``fork_start`` (``SessionRecord``): its hand-off is told before the first
    prompt, and it is cleared (but for the turns count) once a thread is bound."""

    @property
    def preface(self) -> str | None:
        """What the next prompt is told before its own text (a fork's hand-off)."""
        handoff = (self.fork_start or {}).get("handoff")
        return handoff if isinstance(handoff, str) and handoff else None


class Seat(Protocol):
    """A live session as the cap on processes sees it (a ``SessionHost``)."""

    @property
    def session_id(self) -> str: ...
    @property
    def provider(self) -> str: ...
    @property
    def holder(self) -> Issuer: ...
    @property
    def busy(self) -> bool: ...
    @property
    def last_active(self) -> float: ...
    @property
    def process(self) -> ProcessInfo | None: ...
    async def suspend(self) -> None: ...


def owns_process(providers: Mapping[str, Provider], live: Seat) -> bool:
    """Whether the session's provider runs one CLI process per session."""
    provider = providers.get(live.provider)
    return provider is not None and not provider.capabilities.shared_process


async def make_room(
    live: Seat,
    sessions: Iterable[Seat],
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
    if not owns_process(providers, live) or live.process is not None:
        return
    holders = [
        other
        for other in sessions
        if other is not live
        and owns_process(providers, other)
        and (other.busy or other.process is not None)
    ]
    mine = [h for h in holders if h.holder.name == live.holder.name]
    closing = _idlest(mine, len(mine) + 1 - cap.per_key) if cap.divided else []
    if closing is None:
        raise cap.over_share(live.holder, held=len(mine))
    others = [h for h in holders if h not in closing]
    more = _idlest(others, len(others) + 1 - cap.limit_for(live.holder))
    if more is None:
        raise cap.full(live.holder, total=len(holders), held=len(mine))
    for other in [*closing, *more]:
        log.info("closing the idle CLI of session %s to make room", other.session_id)
        await other.suspend()


def _idlest(holders: list[Seat], count: int) -> list[Seat] | None:
    """The ``count`` longest-idle of ``holders`` with a process to close (none when
    ``count`` <= 0), or None when fewer are idle."""
    if count <= 0:
        return []
    idle = sorted(
        (h for h in holders if not h.busy and h.process is not None),
        key=lambda h: h.last_active,
    )
    return idle[:count] if len(idle) >= count else None

"""Sessions as the API sees them: one interface, for one gateway or for a cluster of them.

    Sessions ─┬─ LocalSessions      the live sessions of this process (app/runtime/local.py)
              └─ ClusteredSessions  wraps a LocalSessions: runs a command here when this
                                    replica holds the session, else forwards it to the one
                                    that does; owns loss and adoption (app/runtime/clustered.py)

``app/main.py`` builds one of the two. Everything a client can see is in the store and the
event log, so a session's live side (its CLI link, its running turn, its pending approvals)
can be dropped (idle, crash, restart, another replica taking it) and rebuilt from its binding
on the next turn.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol, TypeVar

from app.providers.base import ProcessInfo
from app.records import SessionRecord
from app.runtime.commands import Issuer, SessionCommand
from app.runtime.eventlog import EventLog
from app.runtime.figures import FigureBook
from app.runtime.history import WorkspaceHistory
from app.runtime.requests import SessionRequest
from app.settings import Settings
from app.store.interface import Storage

R = TypeVar("R")


class Sessions(Protocol):
    """Create sessions, read them, and run commands on them (app/runtime/commands.py)."""

    settings: Settings
    store: Storage
    events: EventLog
    clock: Callable[[], datetime]
    figures: FigureBook
    """Each provider's measured turns on this replica (routing strategies, metrics)."""
    history: WorkspaceHistory
    """Each session's workspace as recorded at its turns' starts and ends."""

    async def create(self, request: SessionRequest) -> SessionRecord:
        """Validate everything, then store the session whole; nothing is spawned here."""
        ...

    async def get(self, session_id: str, *, owner: str | None = None) -> SessionRecord:
        """The session (404 when it does not exist or ``owner`` is set and is not its owner)."""
        ...

    async def execute(self, command: SessionCommand[R], issuer: Issuer) -> R:
        """Run ``command`` as the key ``issuer``: only on a session that key may reach."""
        ...

    async def recover(self) -> None:
        """At start: end the turns and approvals that died with a previous process."""
        ...

    async def start(self) -> None:
        """After ``recover``: serve what comes from outside the API (forwarded commands)."""
        ...

    async def replica_of(self, session_id: str) -> str | None:
        """The replica that runs the session (None on a single gateway, or when none does)."""
        ...

    def process_info(self, session_id: str) -> ProcessInfo | None:
        """The session's CLI process here, if it has one."""
        ...

    async def thread_id(self, row: SessionRecord) -> str | None:
        """The CLI thread the session continues."""
        ...

    async def wait_turn(self, session_id: str) -> None:
        """Return once the session's running turn (if any) here has ended."""
        ...

    async def suspend_idle(self, now: float | None = None) -> int:
        """Close live processes idle past their provider's ``idle_timeout_s``."""
        ...

    async def aclose(self) -> None:
        """Stop every live session (turns end as interrupted); used at shutdown."""
        ...

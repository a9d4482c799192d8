"""Work on a session that no turn may overlap: a revert, a fork, a change of its settings.

While one runs on a session, this replica starts no turn on it and no second such operation:
each is refused with a 409 naming what runs. ``LocalSessions`` marks the session under its
guard, once it has checked that no turn runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.errors import ConfigureInProgress, Conflict, ForkInProgress, RevertInProgress


@dataclass(frozen=True, kw_only=True)
class Operation:
    """One kind of exclusive work, and the 409 that names it."""

    doing: str
    """What the session is being, in a sentence ("reverted", "forked")."""
    error: type[Conflict]


REVERT = Operation(doing="reverted", error=RevertInProgress)
FORK = Operation(doing="forked", error=ForkInProgress)
CONFIGURE = Operation(doing="configured", error=ConfigureInProgress)


class Exclusive:
    """The sessions an exclusive operation runs on here, and which."""

    def __init__(self) -> None:
        self._running: dict[str, Operation] = {}

    def refuse_turn(self, session_id: str) -> None:
        """Raise the running operation's 409 when one runs on ``session_id``."""
        running = self._running.get(session_id)
        if running is not None:
            raise running.error(
                f"session {session_id} is being {running.doing}; start the turn once that "
                "has answered"
            )

    def begin(self, session_id: str, operation: Operation) -> None:
        """Mark ``session_id`` (409 when an operation runs on it already)."""
        running = self._running.get(session_id)
        if running is not None:
            raise running.error(f"session {session_id} is already being {running.doing}")
        self._running[session_id] = operation

    def end(self, session_id: str) -> None:
        self._running.pop(session_id, None)

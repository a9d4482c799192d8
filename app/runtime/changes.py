"""What a session's turns changed in its workspace, between two of its recorded states.

    from = start      the workspace when the session's first turn started
           <turn id>  … when that turn started
    to   = now        the workspace as it is now
           <turn id>  … when that turn ended

``from=T&to=T`` is what turn T changed. Ownership is checked before anything is read, as for
every read of a session (app/runtime/reads.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.errors import InvalidRequest, NotFound, SnapshotUnavailable
from app.process.snapshots import NOW, Changes
from app.records import LIVE_TURN_STATUSES, TurnRecord
from app.runtime.sessions import Sessions

START = "start"


@dataclass(frozen=True, kw_only=True)
class Span:
    """Two recorded states of one session's workspace: tree ids, or ``NOW`` for ``target``."""

    session_id: str
    workspace: Path
    base: str
    target: str


async def _turn(manager: Sessions, session_id: str, turn_id: str, field: str) -> TurnRecord:
    turn = await manager.store.get_turn(session_id, turn_id)
    if turn is None:
        raise NotFound(
            f"{field}: session {session_id} has no turn {turn_id[:80]!r}; give a turn id "
            f"(GET /v1/sessions/{session_id}/turns) or {START if field == 'from' else NOW!r}",
            field=field,
        )
    return turn


async def span(
    manager: Sessions, session_id: str, *, owner: str | None, from_: str, to: str
) -> Span:
    """The two states ``from_`` and ``to`` name (404 for a session that is not the
    caller's, 422 for a turn it does not have or a ``from`` after ``to``, 409 for a state
    that was not recorded)."""
    row = await manager.get(session_id, owner=owner)
    history = manager.history
    if from_ == START:
        first = await manager.store.list_turns(session_id, limit=1, before=2)
        if not first:
            raise SnapshotUnavailable(
                f"session {session_id} has run no turn yet: nothing was recorded"
            )
        start_turn = first[0]
    else:
        start_turn = await _turn(manager, session_id, from_, "from")
    target = NOW
    if to != NOW:
        end_turn = await _turn(manager, session_id, to, "to")
        if end_turn.number < start_turn.number:
            raise InvalidRequest(
                f"from (turn {start_turn.number}) is after to (turn {end_turn.number}): "
                "give the earlier turn as from",
                field="from",
            )
        if end_turn.status in LIVE_TURN_STATUSES:
            raise SnapshotUnavailable(
                f"turn {end_turn.id} has not ended; use to=now for what it has changed so far",
                turn_id=end_turn.id,
            )
        target = await history.state(session_id, end_turn, "end")
    base = await history.state(session_id, start_turn, "start")
    return Span(session_id=session_id, workspace=Path(row.workspace), base=base, target=target)


async def changes(manager: Sessions, at: Span) -> Changes:
    """The files changed over ``at``."""
    return await manager.history.changes(at.session_id, at.workspace, at.base, at.target)


async def patch(manager: Sessions, at: Span, *, binary: bool) -> bytes:
    """The unified diff over ``at`` (``binary``: one ``git apply`` takes whole)."""
    return await manager.history.patch(
        at.session_id, at.workspace, at.base, at.target, binary=binary
    )

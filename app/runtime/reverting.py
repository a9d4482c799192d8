"""A revert: the workspace's files put back as they were when a turn started, told as a
``session.reverted`` event and, on the agent's next prompt, as a note (app/runtime/history.py).

The session's live side (app/runtime/local.py) has made sure no turn runs, and none starts,
while this runs.
"""

from __future__ import annotations

import logging
from pathlib import Path

from app.errors import NotFound
from app.events import SessionReverted
from app.records import RevertRecord, SessionRecord, json_dict
from app.runtime.eventlog import EventLog
from app.runtime.history import WorkspaceHistory, changed_files, summary
from app.store.interface import Storage

log = logging.getLogger(__name__)


async def revert(
    row: SessionRecord,
    to_turn: str,
    *,
    by: str,
    history: WorkspaceHistory,
    store: Storage,
    events: EventLog,
) -> RevertRecord:
    """Revert ``row``'s workspace to the start of its turn ``to_turn``; what changed."""
    turn = await store.get_turn(row.id, to_turn)
    if turn is None:
        raise NotFound(
            f"to_turn: session {row.id} has no turn {to_turn[:80]!r} (GET "
            f"/v1/sessions/{row.id}/turns lists them)",
            field="to_turn",
        )
    changes = await history.revert(row.id, Path(row.workspace), turn)
    files = changed_files(changes)
    await events.append(
        row.id,
        SessionReverted(
            to_turn=turn.id,
            turn_number=turn.number,
            files=files,
            changes=summary(changes),
            by=by,
        ),
        provider=row.provider,
    )
    log.info(
        "session %s reverted to the start of turn %d (%d files changed)",
        row.id,
        turn.number,
        len(files),
        extra={"session_id": row.id, "turn_id": turn.id},
    )
    return RevertRecord(
        session_id=row.id,
        to_turn=turn.id,
        turn_number=turn.number,
        files=[json_dict(file) for file in files],
        additions=changes.additions,
        deletions=changes.deletions,
    )

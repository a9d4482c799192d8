"""Start-up recovery: what a stopped (or killed) gateway left running is ended, visibly.

Pending approvals are resolved ``expired``; turns that were running or waiting to retry are
``failed`` with kind ``interrupted`` and reason ``gateway_restart`` (one ``turn.failed``
each); sessions become idle and resume from their binding on their next turn.
"""

from __future__ import annotations

from datetime import datetime

from app.events import ApprovalResolved, TurnError, TurnFailed
from app.records import json_dict
from app.runtime.eventlog import EventLog
from app.store.interface import Storage


async def recover(store: Storage, events: EventLog, *, now: datetime) -> None:
    for approval in await store.pending_approvals():
        await store.update_approval(
            approval.id, status="expired", decision="deny", decided_by="gateway", decided_at=now
        )
        await events.append(
            approval.session_id,
            ApprovalResolved(
                approval_id=approval.id, decision="deny", by="gateway", reason="gateway_restart"
            ),
            turn_id=approval.turn_id,
        )
    for turn in await store.unfinished_turns():
        error = TurnError(
            kind="interrupted",
            message="gateway_restart: the gateway stopped while the turn was running",
            retryable=False,
            provider=turn.provider,
            reason="gateway_restart",
        )
        await store.update_turn(turn.id, status="failed", error=json_dict(error), finished_at=now)
        await events.append(
            turn.session_id,
            TurnFailed(error=error),
            turn_id=turn.id,
            attempt=max(turn.attempts, 1),
            provider=turn.provider,
        )
    await store.reset_busy_sessions(now)

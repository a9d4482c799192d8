"""Recovery: what a stopped (or killed) gateway left running is ended, visibly.

Pending approvals and questions are resolved ``expired``; turns that were running or waiting
to retry are ``failed`` with kind ``interrupted`` and reason ``gateway_restart`` (one
``turn.failed`` each); sessions become idle and resume from their binding on their next
turn. With several replicas the same happens to the sessions of a replica that was lost, one
session at a time, on the replica that adopts them (reason ``replica_lost``), never to a
session another replica still runs.
"""

from __future__ import annotations

from collections.abc import Container
from datetime import datetime
from typing import Literal

from app.events import ApprovalResolved, QuestionResolved, TurnError, TurnFailed
from app.records import json_dict
from app.runtime.eventlog import EventLog
from app.store.interface import Storage


async def recover(store: Storage, events: EventLog, *, now: datetime) -> None:
    """End everything the previous process left running (a single gateway, at start)."""
    await end_unfinished(store, events, now=now, reason="gateway_restart")
    await store.reset_busy_sessions(now)


async def end_unfinished(
    store: Storage,
    events: EventLog,
    *,
    now: datetime,
    reason: Literal["gateway_restart", "replica_lost"],
    sessions: Container[str] | None = None,
) -> set[str]:
    """Expire the pending approvals and fail the unfinished turns (of ``sessions`` only, when
    given); returns the sessions it ended something in."""
    ended: set[str] = set()
    for approval in await store.pending_approvals():
        if sessions is not None and approval.session_id not in sessions:
            continue
        resolved: ApprovalResolved | QuestionResolved
        if approval.kind == "question":
            await store.update_approval(
                approval.id, status="expired", decided_by="gateway", decided_at=now
            )
            resolved = QuestionResolved(
                question_id=approval.id, answers=None, by="gateway", reason=reason
            )
        else:
            await store.update_approval(
                approval.id, status="expired", decision="deny", decided_by="gateway", decided_at=now
            )
            resolved = ApprovalResolved(
                approval_id=approval.id, decision="deny", by="gateway", reason=reason
            )
        await events.append(approval.session_id, resolved, turn_id=approval.turn_id)
        ended.add(approval.session_id)
    for turn in await store.unfinished_turns():
        if sessions is not None and turn.session_id not in sessions:
            continue
        error = TurnError(
            kind="interrupted",
            message=_MESSAGES[reason],
            retryable=False,
            provider=turn.provider,
            reason=reason,
        )
        await store.update_turn(turn.id, status="failed", error=json_dict(error), finished_at=now)
        await events.append(
            turn.session_id,
            TurnFailed(error=error),
            turn_id=turn.id,
            attempt=max(turn.attempts, 1),
            provider=turn.provider,
        )
        ended.add(turn.session_id)
    return ended


_MESSAGES = {
    "gateway_restart": "gateway_restart: the gateway stopped while the turn was running",
    "replica_lost": "replica_lost: the replica running the turn stopped answering; "
    "the next turn resumes the same thread",
}

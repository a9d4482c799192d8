"""Recovery: what a stopped (or killed) gateway left running is ended, visibly.

Pending approvals and questions are resolved ``expired``; turns that were running or waiting
to retry are ``failed`` with kind ``interrupted`` and reason ``gateway_restart`` (one
``turn.failed`` each); sessions become idle and resume from their binding on their next
turn. A turn waiting for a usage limit's reset (``resume_at`` stored) is the exception: its
wait goes on, and ``LocalSessions`` resumes it (``scheduled_turns``). With several
replicas the same happens to the sessions of a replica that was lost, one session at a time,
on the replica that adopts them (reason ``replica_lost``), never to a session another replica
still runs.
"""

from __future__ import annotations

from collections.abc import Container
from datetime import datetime
from typing import Literal

from app.events import ApprovalResolved, QuestionResolved, TurnError, TurnFailed
from app.records import TurnRecord, json_dict
from app.runtime.eventlog import EventLog
from app.store.interface import Storage


async def recover(store: Storage, events: EventLog, *, now: datetime) -> list[TurnRecord]:
    """End everything the previous process left running (a single gateway, at start); the
    turns whose wait for a usage limit's reset goes on, for ``LocalSessions`` to resume."""
    await end_unfinished(store, events, now=now, reason="gateway_restart")
    await store.reset_busy_sessions(now)
    return await scheduled_turns(store)


async def scheduled_turns(
    store: Storage, sessions: Container[str] | None = None
) -> list[TurnRecord]:
    """The unfinished turns waiting for a usage limit's reset (of ``sessions`` only)."""
    return [
        turn
        for turn in await store.unfinished_turns()
        if turn.resume_at is not None and (sessions is None or turn.session_id in sessions)
    ]


async def end_unfinished(
    store: Storage,
    events: EventLog,
    *,
    now: datetime,
    reason: Literal["gateway_restart", "replica_lost"],
    sessions: Container[str] | None = None,
) -> set[str]:
    """Expire the pending approvals and fail the unfinished turns (of ``sessions`` only, when
    given) but those waiting for a usage limit's reset; returns the sessions it ended
    something in."""
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
        if turn.resume_at is not None:
            continue
        await fail_turn(store, events, turn, now=now, reason=reason)
        ended.add(turn.session_id)
    return ended


async def fail_turn(
    store: Storage,
    events: EventLog,
    turn: TurnRecord,
    *,
    now: datetime,
    reason: Literal["gateway_restart", "replica_lost"],
    message: str | None = None,
) -> None:
    """End an unfinished turn that no task runs any more: ``failed``, kind ``interrupted``."""
    error = TurnError(
        kind="interrupted",
        message=message or _MESSAGES[reason],
        retryable=False,
        provider=turn.provider,
        reason=reason,
    )
    await store.update_turn(
        turn.id, status="failed", error=json_dict(error), finished_at=now, resume_at=None
    )
    await events.append(
        turn.session_id,
        TurnFailed(error=error),
        turn_id=turn.id,
        attempt=max(turn.attempts, 1),
        provider=turn.provider,
    )


_MESSAGES = {
    "gateway_restart": "gateway_restart: the gateway stopped while the turn was running",
    "replica_lost": "replica_lost: the replica running the turn stopped answering; "
    "the next turn resumes the same thread",
}

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

from app.events import (
    ApprovalResolved,
    EventData,
    QuestionResolved,
    TurnCompleted,
    TurnError,
    TurnFailed,
    TurnInterrupted,
)
from app.records import (
    BUSY_SESSION_STATUSES,
    LIVE_TURN_STATUSES,
    ApprovalRecord,
    TurnRecord,
    json_dict,
)
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
        await _expire(store, events, approval, now=now, reason=reason)
        ended.add(approval.session_id)
    for turn in await store.unfinished_turns():
        if sessions is not None and turn.session_id not in sessions:
            continue
        if turn.resume_at is not None:
            continue
        await fail_turn(store, events, turn, now=now, reason=reason)
        ended.add(turn.session_id)
    return ended


async def _expire(
    store: Storage,
    events: EventLog,
    approval: ApprovalRecord,
    *,
    now: datetime,
    reason: Literal["gateway_restart", "replica_lost"],
) -> None:
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


TERMINAL_TYPES = (TurnCompleted.TYPE, TurnFailed.TYPE, TurnInterrupted.TYPE)
_STATUS_OF = {
    TurnCompleted.TYPE: "completed",
    TurnFailed.TYPE: "failed",
    TurnInterrupted.TYPE: "interrupted",
}


async def settle_session(
    store: Storage, events: EventLog, session_id: str, *, now: datetime
) -> TurnRecord | None:
    """After this replica claimed a session that nothing runs here: end what died with the
    replica that ran it, so its log and its rows say the same thing; the turn whose wait for a
    usage limit's reset goes on, for the caller to resume.

    Its pending approvals and questions expire. Its newest turn (a session runs one at a
    time) is ended once: a turn still unfinished in its row whose end the log already tells
    (the old owner told it and was fenced before it could write the row) takes the status the
    log says; one whose end nobody told fails (``replica_lost``); a turn finished in its row
    whose end the log does not tell (the old owner was fenced between the two) gets the
    terminal event its row says. The session is idle afterwards."""
    for kind in ("tool", "question"):
        for approval in await store.list_approvals(
            session_id, status="pending", limit=1000, kind=kind
        ):
            await _expire(store, events, approval, now=now, reason="replica_lost")
    newest = next(iter(await store.list_turns(session_id, limit=1)), None)
    scheduled: TurnRecord | None = None
    if newest is not None:
        told = await _told_end(store, session_id, newest.id)
        if newest.status in LIVE_TURN_STATUSES:
            if told is not None:
                await store.update_turn(newest.id, status=told, finished_at=now, resume_at=None)
            elif newest.resume_at is not None:
                scheduled = newest
            else:
                await fail_turn(store, events, newest, now=now, reason="replica_lost")
        elif told is None:
            await events.append(
                session_id,
                _terminal_of(newest),
                turn_id=newest.id,
                attempt=max(newest.attempts, 1),
                provider=newest.provider,
            )
    row = await store.get_session(session_id)
    if scheduled is None and row is not None and row.status in BUSY_SESSION_STATUSES:
        await store.update_session(session_id, status="idle", updated_at=now)
    return scheduled


async def _told_end(store: Storage, session_id: str, turn_id: str) -> str | None:
    """The status the log's terminal event of the turn says, None when it tells none."""
    last = await store.last_event_seq(session_id)
    for event in await store.events_before(
        session_id, before=last + 1, types=TERMINAL_TYPES, limit=1
    ):
        if event.turn_id == turn_id:
            return _STATUS_OF[event.type]
    return None


def _terminal_of(turn: TurnRecord) -> EventData:
    """The terminal event a finished turn's row says."""
    if turn.status == "completed":
        return TurnCompleted(final_text=turn.final_text or "", usage=turn.usage)
    if turn.status == "interrupted":
        message = (turn.error or {}).get("message")
        return TurnInterrupted(reason=str(message or "interrupted"))
    error = turn.error or {"kind": "unknown", "message": "the turn failed"}
    return TurnFailed(error=TurnError.model_validate(error))


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

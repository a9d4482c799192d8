"""Route dependencies and the record → public-schema conversions the routes share."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from pydantic import JsonValue
from starlette.requests import HTTPConnection

from app.api.budgetviews import session_budget
from app.api.schemas import (
    ApprovalPublic,
    ProcessPublic,
    QuestionPublic,
    QuestionStatus,
    RetryPolicyPublic,
    Selection,
    SessionPublic,
    TurnPublic,
    UsageTotalsPublic,
)
from app.api.security import Principal, access_of
from app.events import QuestionAnswer, TurnError, Usage
from app.records import ApprovalRecord, SessionRecord, TurnRecord, UsageTotals
from app.runtime import reads
from app.runtime.commands import Issuer
from app.runtime.coordinator import RetryPolicy
from app.runtime.questions import asked_questions
from app.runtime.sessions import Sessions


def get_manager(request: Request) -> Sessions:
    manager: Sessions = request.app.state.manager
    return manager


Manager = Annotated[Sessions, Depends(get_manager)]


def issuer(principal: Principal) -> Issuer:
    """The key a command comes from, as the runtime (and any replica it is forwarded to)
    takes it: it decides which sessions the command may reach."""
    return Issuer(name=principal.name, admin=principal.admin)


@contextlib.asynccontextmanager
async def admit_session(
    connection: HTTPConnection, manager: Sessions, principal: Principal
) -> AsyncIterator[None]:
    """Create a session within the key's quota (rate and open-session cap), else 429."""
    quota = access_of(connection).sessions

    async def count_open() -> int:
        return await reads.count_open_sessions(manager, principal.name)

    async with quota.admit(principal.name, count_open):
        yield


async def session_public(
    manager: Sessions, row: SessionRecord, usage: UsageTotals | None = None
) -> SessionPublic:
    """``row`` as the API shows it; ``usage`` when the caller read it already (a list)."""
    if usage is None:
        usage = (await reads.session_usage(manager, [row]))[row.id]
    process = manager.process_info(row.id)
    return SessionPublic(
        id=row.id,
        title=row.title,
        provider=row.provider,
        selection=Selection.model_validate(row.selection) if row.selection else None,
        workspace=row.workspace,
        repository=row.repository,
        branch=row.branch,
        base=row.base,
        forked_from=row.forked_from,
        forked_at=row.forked_at,
        model=row.model,
        approval_mode=row.approval_mode,
        status=row.status,
        thread_id=await manager.thread_id(row),
        created_at=row.created_at,
        updated_at=row.updated_at,
        closed_at=row.closed_at,
        last_seq=row.last_seq,
        metadata=row.metadata,
        process=ProcessPublic(pid=process.pid, started_at=process.started_at, spawns=process.spawns)
        if process
        else None,
        owner=await manager.replica_of(row.id),
        usage=usage_public(usage),
        budget=session_budget(row.budget, usage),
    )


def usage_public(totals: UsageTotals) -> UsageTotalsPublic:
    return UsageTotalsPublic(
        input_tokens=totals.input_tokens,
        output_tokens=totals.output_tokens,
        cached_input_tokens=totals.cached_input_tokens,
        cache_creation_input_tokens=totals.cache_creation_input_tokens,
        cost_usd=totals.cost_usd,
        turns=totals.turns,
    )


def turn_public(row: TurnRecord) -> TurnPublic:
    return TurnPublic(
        id=row.id,
        session_id=row.session_id,
        number=row.number,
        status=row.status,
        attempts=row.attempts,
        provider=row.provider,
        prompt=row.prompt,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        resume_at=row.resume_at,
        usage=Usage.model_validate(row.usage) if row.usage else None,
        error=TurnError.model_validate(row.error) if row.error else None,
        final_text=row.final_text,
        retry=_retry_public(row.retry_policy),
        changes=f"/v1/sessions/{row.session_id}/changes?from={row.id}&to={row.id}",
    )


def _retry_public(snapshot: dict[str, JsonValue] | None) -> RetryPolicyPublic | None:
    if snapshot is None:
        return None
    policy = RetryPolicy.from_snapshot(snapshot)
    return RetryPolicyPublic(
        enabled=policy.enabled,
        strategy=policy.strategy,
        delays_s=list(policy.delays_s),
        max_attempts=policy.max_attempts,
        usage_limit=policy.usage_limit,
        usage_limit_max_wait_s=policy.usage_limit_max_wait_s,
    )


def approval_public(row: ApprovalRecord) -> ApprovalPublic:
    return ApprovalPublic(
        id=row.id,
        session_id=row.session_id,
        turn_id=row.turn_id,
        status=row.status,
        tool=row.tool,
        input=row.input,
        title=row.title,
        decision=row.decision,
        message=row.message,
        decided_by=row.decided_by,
        created_at=row.created_at,
        expires_at=row.expires_at,
        decided_at=row.decided_at,
        updated_input=row.updated_input,
        updated_by=row.updated_by,
    )


_QUESTION_STATUS: dict[str, QuestionStatus] = {
    "pending": "pending",
    "answered": "answered",
    "expired": "expired",
    "cancelled": "cancelled",
}


def question_public(row: ApprovalRecord) -> QuestionPublic:
    """A pending request of kind ``question`` as the API shows it."""
    answers = row.answers
    return QuestionPublic(
        id=row.id,
        session_id=row.session_id,
        turn_id=row.turn_id,
        status=_QUESTION_STATUS.get(row.status, "cancelled"),
        tool=row.tool,
        questions=asked_questions(row.input),
        answers=[QuestionAnswer.model_validate(a) for a in answers] if answers else None,
        answered_by=row.updated_by,
        created_at=row.created_at,
        expires_at=row.expires_at,
        resolved_at=row.decided_at,
    )

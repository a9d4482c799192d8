"""Every API call as a ``Call``: the one place paths, queries and bodies are spelt."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import httpx
from pydantic import TypeAdapter

from agent_gateway_sdk._calls import Call, body, query, segment
from agent_gateway_sdk.events import EventPage
from agent_gateway_sdk.models import (
    Answer,
    Approval,
    ApprovalMode,
    ApprovalStatus,
    Capability,
    Changes,
    Decision,
    InterruptAccepted,
    Provider,
    QuestionRequest,
    QuestionStatus,
    Readiness,
    RetryPolicy,
    Revert,
    RunResult,
    SessionInfo,
    SessionStatus,
    Strategy,
    Turn,
    UsageReport,
)

SESSIONS = "/v1/sessions"
NO_READ_TIMEOUT = httpx.Timeout(30.0, read=None)
"""For a call that lasts as long as a turn (``POST /v1/runs``): the gateway bounds it."""

_session: TypeAdapter[SessionInfo] = TypeAdapter(SessionInfo)
_sessions: TypeAdapter[list[SessionInfo]] = TypeAdapter(list[SessionInfo])
_turn: TypeAdapter[Turn] = TypeAdapter(Turn)
_turns: TypeAdapter[list[Turn]] = TypeAdapter(list[Turn])
_approval: TypeAdapter[Approval] = TypeAdapter(Approval)
_approvals: TypeAdapter[list[Approval]] = TypeAdapter(list[Approval])
_question: TypeAdapter[QuestionRequest] = TypeAdapter(QuestionRequest)
_questions: TypeAdapter[list[QuestionRequest]] = TypeAdapter(list[QuestionRequest])
_text: TypeAdapter[str] = TypeAdapter(str)

RetryArg = RetryPolicy | Mapping[str, Any] | None
AnswerArg = Answer | Mapping[str, Any]


def once(idempotency_key: str | None) -> dict[str, str]:
    """The ``Idempotency-Key`` header: a request sent again with the same key and body gets
    the first answer, and does its work once."""
    return {"Idempotency-Key": idempotency_key} if idempotency_key else {}


def session_path(session_id: str, *rest: str) -> str:
    return "/".join((SESSIONS, segment(session_id), *rest))


def create_session(
    *,
    workspace: str | None,
    repository: str | None,
    ref: str | None,
    branch: str | None,
    provider: str | None,
    scenario: str | None,
    strategy: Strategy | None,
    model: str | None,
    approval_mode: ApprovalMode | None,
    retry: RetryArg,
    requires: Sequence[Capability] | None,
    fallback: bool | None,
    metadata: Mapping[str, Any] | None,
    budget: Mapping[str, Any] | None = None,
    idempotency_key: str | None = None,
) -> Call[SessionInfo]:
    sent = body(
        workspace=workspace,
        repository=repository,
        ref=ref,
        branch=branch,
        provider=provider,
        scenario=scenario,
        strategy=strategy,
        model=model,
        approval_mode=approval_mode,
        retry=retry,
        requires=requires,
        fallback=fallback,
        metadata=metadata,
        budget=budget,
    )
    return Call("POST", SESSIONS, _session, body=sent, headers=once(idempotency_key))


def configure_session(
    session_id: str,
    *,
    model: str | None,
    approval_mode: ApprovalMode | None,
    provider: str | None,
) -> Call[SessionInfo]:
    sent = body(model=model, approval_mode=approval_mode, provider=provider)
    return Call("PATCH", session_path(session_id), _session, body=sent)


def get_session(session_id: str) -> Call[SessionInfo]:
    return Call("GET", session_path(session_id), _session)


def list_sessions(
    *,
    status: SessionStatus | None,
    limit: int | None,
    before: datetime | None,
    provider: str | None = None,
    q: str | None = None,
) -> Call[list[SessionInfo]]:
    params = query(status=status, limit=limit, before=before, provider=provider, q=q)
    return Call("GET", SESSIONS, _sessions, params=params, unwrap="sessions")


def delete_session(session_id: str) -> Call[SessionInfo]:
    return Call("DELETE", session_path(session_id), _session)


def fork_session(session_id: str, *, at_turn: str | None) -> Call[SessionInfo]:
    return Call("POST", session_path(session_id, "fork"), _session, body=body(at_turn=at_turn))


def revert_session(session_id: str, *, to_turn: str) -> Call[Revert]:
    path = session_path(session_id, "revert")
    return Call("POST", path, TypeAdapter(Revert), body=body(to_turn=to_turn))


def changes(session_id: str, *, from_: str | None, to: str | None) -> Call[Changes]:
    params = query(**{"from": from_, "to": to})
    return Call("GET", session_path(session_id, "changes"), TypeAdapter(Changes), params=params)


def patch(session_id: str, *, from_: str | None, to: str | None) -> Call[str]:
    params = query(**{"from": from_, "to": to, "format": "patch"})
    path = session_path(session_id, "changes")
    return Call("GET", path, _text, params=params, text=True)


def interrupt(session_id: str) -> Call[InterruptAccepted]:
    return Call("POST", session_path(session_id, "interrupt"), TypeAdapter(InterruptAccepted))


def start_turn(
    session_id: str, *, prompt: str, retry: RetryArg, idempotency_key: str | None = None
) -> Call[Turn]:
    sent = body(prompt=prompt, retry=retry)
    path = session_path(session_id, "turns")
    return Call("POST", path, _turn, body=sent, headers=once(idempotency_key))


def get_turn(session_id: str, turn_id: str) -> Call[Turn]:
    return Call("GET", session_path(session_id, "turns", segment(turn_id)), _turn)


def list_turns(session_id: str, *, limit: int | None, before: int | None) -> Call[list[Turn]]:
    params = query(limit=limit, before=before)
    path = session_path(session_id, "turns")
    return Call("GET", path, _turns, params=params, unwrap="turns")


def list_approvals(
    session_id: str,
    *,
    status: ApprovalStatus | None,
    limit: int | None,
    before: datetime | None,
) -> Call[list[Approval]]:
    params = query(status=status, limit=limit, before=before)
    path = session_path(session_id, "approvals")
    return Call("GET", path, _approvals, params=params, unwrap="approvals")


def respond_approval(
    session_id: str,
    approval_id: str,
    *,
    decision: Decision,
    message: str | None,
    updated_input: Mapping[str, Any] | None,
    idempotency_key: str | None = None,
) -> Call[Approval]:
    sent = body(decision=decision, message=message, updated_input=updated_input)
    path = session_path(session_id, "approvals", segment(approval_id))
    return Call("POST", path, _approval, body=sent, headers=once(idempotency_key))


def list_questions(
    session_id: str,
    *,
    status: QuestionStatus | None,
    limit: int | None,
    before: datetime | None,
) -> Call[list[QuestionRequest]]:
    params = query(status=status, limit=limit, before=before)
    path = session_path(session_id, "questions")
    return Call("GET", path, _questions, params=params, unwrap="questions")


def answer_question(
    session_id: str,
    question_id: str,
    *,
    answers: Sequence[AnswerArg],
    idempotency_key: str | None = None,
) -> Call[QuestionRequest]:
    sent = body(answers=[Answer.model_validate(a) for a in answers])
    path = session_path(session_id, "questions", segment(question_id))
    return Call("POST", path, _question, body=sent, headers=once(idempotency_key))


def events_page(session_id: str, *, after: int | None, limit: int | None) -> Call[EventPage]:
    params = query(after=after, limit=limit)
    return Call("GET", session_path(session_id, "events"), TypeAdapter(EventPage), params=params)


def run_body(
    *,
    prompt: str,
    workspace: str,
    provider: str | None,
    scenario: str | None,
    strategy: Strategy | None,
    model: str | None,
    approval_mode: ApprovalMode | None,
    retry: RetryArg,
    requires: Sequence[Capability] | None,
    fallback: bool | None,
    budget: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    return body(
        budget=budget,
        prompt=prompt,
        workspace=workspace,
        provider=provider,
        scenario=scenario,
        strategy=strategy,
        model=model,
        approval_mode=approval_mode,
        retry=retry,
        requires=requires,
        fallback=fallback,
    )


def create_run(sent: dict[str, Any], idempotency_key: str | None = None) -> Call[RunResult]:
    reads = TypeAdapter(RunResult)
    headers = once(idempotency_key)
    return Call("POST", "/v1/runs", reads, body=sent, timeout=NO_READ_TIMEOUT, headers=headers)


def list_providers(*, fresh: bool | None) -> Call[list[Provider]]:
    reads = TypeAdapter(list[Provider])
    return Call("GET", "/v1/providers", reads, params=query(fresh=fresh), unwrap="providers")


def get_provider(name: str, *, fresh: bool | None) -> Call[Provider]:
    path = f"/v1/providers/{segment(name)}"
    return Call("GET", path, TypeAdapter(Provider), params=query(fresh=fresh))


def usage(*, from_: datetime | None, to: datetime | None) -> Call[UsageReport]:
    params = query(**{"from": from_, "to": to})
    return Call("GET", "/v1/usage", TypeAdapter(UsageReport), params=params)


def readiness() -> Call[Readiness]:
    return Call("GET", "/readyz", TypeAdapter(Readiness), accept=frozenset({503}))


def liveness() -> Call[dict[str, Any]]:
    return Call("GET", "/healthz", TypeAdapter(dict[str, Any]))

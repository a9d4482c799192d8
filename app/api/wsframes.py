"""The frames a WebSocket client sends on a session's socket (``WsClientFrame``); each is the
command its REST request builds (app/api/wscommands.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, JsonValue, StringConstraints

from app.api.fields import IdempotencyKeyText
from app.api.schemas import (
    QuestionAnswers,
    RetryPolicyIn,
    SessionSettingsIn,
    _In,
)
from app.events import ApprovalDecision


class WsTurnStart(_In):
    type: Literal["turn.start"]
    prompt: Annotated[str, StringConstraints(min_length=1, max_length=512 * 1024)]
    retry: RetryPolicyIn | None = None
    idempotency_key: IdempotencyKeyText | None = None
    """As ``Idempotency-Key`` on ``POST …/turns``: the same key and frame again (or that
    POST) gets the first ``turn`` again, with ``replayed: true``."""


class WsApprovalRespond(_In):
    type: Literal["approval.respond"]
    approval_id: Annotated[str, StringConstraints(max_length=64)]
    decision: ApprovalDecision
    message: Annotated[str, StringConstraints(max_length=8192)] | None = None
    updated_input: dict[str, JsonValue] | None = None
    idempotency_key: IdempotencyKeyText | None = None


class WsQuestionAnswer(_In):
    type: Literal["question.answer"]
    question_id: Annotated[str, StringConstraints(max_length=64)]
    answers: QuestionAnswers
    idempotency_key: IdempotencyKeyText | None = None


class WsTurnInterrupt(_In):
    type: Literal["turn.interrupt"]


class WsSessionRevert(_In):
    type: Literal["session.revert"]
    to_turn: Annotated[str, StringConstraints(min_length=1, max_length=128)]


class WsSessionFork(_In):
    """Fork the session as ``POST /v1/sessions/{id}/fork`` does; the ``ack`` carries the new
    session (``session``)."""

    type: Literal["session.fork"]
    at_turn: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None
    """The session's completed turn the fork holds the files and the conversation up to
    (inclusive); default its last completed turn."""


class WsSessionConfigure(SessionSettingsIn):
    """Change the session's model, approval mode or provider as ``PATCH /v1/sessions/{id}``
    does (at least one); the ``ack`` carries the session (``session``)."""

    type: Literal["session.configure"]


WsClientFrame = Annotated[
    WsTurnStart
    | WsApprovalRespond
    | WsQuestionAnswer
    | WsTurnInterrupt
    | WsSessionRevert
    | WsSessionFork
    | WsSessionConfigure,
    Field(discriminator="type"),
]

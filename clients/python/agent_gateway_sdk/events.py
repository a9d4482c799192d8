"""Events: one envelope per item of a session's stream, a union discriminated on ``type``.

Every event is ``{seq, session_id, turn_id, attempt, provider, at, type, data}``; ``data`` is
typed per event type. A type this SDK does not know (a newer gateway's) is an ``UnknownEvent``
whose ``data`` is the raw object, never an error. Control frames (``resync_required``,
``evicted``, ``shutdown``, ``degraded``, ``recovered``) are not events: they carry no ``seq``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, TypeAdapter

from agent_gateway_sdk.models import (
    Answer,
    ApprovalMode,
    ApprovalOption,
    CandidateScore,
    ChangedFile,
    Decision,
    FailureKind,
    Model,
    Question,
    SelectionReason,
    SkippedCandidate,
    Strategy,
    TurnError,
    Usage,
)

# --- the data of each event type ---------------------------------------------------------------


class SessionCreated(Model):
    provider: str
    workspace: str
    model: str | None
    approval_mode: str
    repository: str | None = None
    branch: str | None = None
    base: str | None = None


class SessionProviderSelected(Model):
    provider: str
    reason: SelectionReason
    skipped: list[SkippedCandidate] = []
    strategy: Strategy = "ordered"
    scores: list[CandidateScore] = []


class SessionThreadBound(Model):
    thread_id: str


class HandoffSize(Model):
    turns: int
    chars: int


class SessionForked(Model):
    parent_id: str
    child_id: str
    at_turn: str
    turn_number: int
    conversation: Literal["native", "handoff"]
    handoff: HandoffSize | None = None


class ChangesSummary(Model):
    files: int
    additions: int
    deletions: int


class SessionReverted(Model):
    to_turn: str
    turn_number: int
    files: list[ChangedFile]
    changes: ChangesSummary
    by: str


class SessionConfigured(Model):
    model: str | None
    approval_mode: ApprovalMode
    provider: str
    by: str


class BudgetReached(Model):
    budget: Literal["session", "key_daily", "key_monthly"]
    measure: Literal["cost_usd", "tokens"]
    limit: float
    used: float
    key: str | None = None
    resets_at: datetime | None = None


class SessionClosed(Model):
    reason: str
    kept_branch: str | None = None


class TurnStarted(Model):
    prompt: str


class TurnCompleted(Model):
    final_text: str
    usage: Usage | None = None
    stop_reason: str | None = None
    changes: ChangesSummary | None = None


class TurnFailed(Model):
    error: TurnError


class TurnInterrupted(Model):
    reason: str


class MessageDelta(Model):
    message_id: str
    text: str


class MessageCompleted(Model):
    message_id: str
    text: str


class ReasoningDelta(Model):
    message_id: str
    text: str


class ReasoningCompleted(Model):
    message_id: str
    text: str


class ToolStarted(Model):
    tool_id: str
    name: str
    kind: Literal["command", "file_change", "mcp", "web_search", "other"]
    input: dict[str, Any]


class ToolOutput(Model):
    tool_id: str
    text: str


class ToolCompleted(Model):
    tool_id: str
    status: Literal["completed", "failed", "denied"]
    output: str | None = None
    exit_code: int | None = None


class PlanEntry(Model):
    text: str
    status: Literal["pending", "in_progress", "completed"]


class PlanUpdated(Model):
    entries: list[PlanEntry]


class ApprovalRequested(Model):
    approval_id: str
    tool: str
    input: dict[str, Any]
    options: list[ApprovalOption]
    expires_at: datetime
    title: str | None = None
    tool_id: str | None = None


class ApprovalResolved(Model):
    approval_id: str
    decision: Decision
    by: Literal["client", "policy", "gateway"]
    reason: Literal[
        "decided", "expired", "cancelled", "session_closed", "gateway_restart", "replica_lost"
    ]
    message: str | None = None
    updated_input: dict[str, Any] | None = None
    updated_by: str | None = None


class QuestionAsked(Model):
    question_id: str
    questions: list[Question]
    expires_at: datetime
    tool_id: str | None = None


class QuestionResolved(Model):
    question_id: str
    answers: list[Answer] | None
    by: Literal["client", "gateway"]
    reason: Literal[
        "answered", "expired", "cancelled", "session_closed", "gateway_restart", "replica_lost"
    ]
    answered_by: str | None = None


class RetryScheduled(Model):
    source: Literal["cli", "gateway"]
    attempt: int
    max_attempts: int | None
    delay_s: float | None
    kind: FailureKind
    message: str | None = None
    resume_at: datetime | None = None


class ProviderSwitched(Model):
    from_provider: str
    to_provider: str
    reason: str
    message: str | None = None
    handoff: HandoffSize | None = None


class UsageReported(Model):
    usage: Usage


class Warning(Model):  # the API's name; the builtin is never needed in this module
    message: str
    code: str | None = None


# --- envelopes ---------------------------------------------------------------------------------


class BaseEvent(Model):
    """The envelope every event shares."""

    seq: int
    session_id: str
    turn_id: str | None = None
    attempt: int | None = None
    provider: str | None = None
    at: datetime


class SessionCreatedEvent(BaseEvent):
    type: Literal["session.created"]
    data: SessionCreated


class SessionProviderSelectedEvent(BaseEvent):
    type: Literal["session.provider_selected"]
    data: SessionProviderSelected


class SessionThreadBoundEvent(BaseEvent):
    type: Literal["session.thread_bound"]
    data: SessionThreadBound


class SessionForkedEvent(BaseEvent):
    type: Literal["session.forked"]
    data: SessionForked


class SessionRevertedEvent(BaseEvent):
    type: Literal["session.reverted"]
    data: SessionReverted


class SessionConfiguredEvent(BaseEvent):
    type: Literal["session.configured"]
    data: SessionConfigured


class BudgetReachedEvent(BaseEvent):
    type: Literal["budget.reached"]
    data: BudgetReached


class SessionClosedEvent(BaseEvent):
    type: Literal["session.closed"]
    data: SessionClosed


class TurnStartedEvent(BaseEvent):
    type: Literal["turn.started"]
    data: TurnStarted


class TurnCompletedEvent(BaseEvent):
    type: Literal["turn.completed"]
    data: TurnCompleted


class TurnFailedEvent(BaseEvent):
    type: Literal["turn.failed"]
    data: TurnFailed


class TurnInterruptedEvent(BaseEvent):
    type: Literal["turn.interrupted"]
    data: TurnInterrupted


class MessageDeltaEvent(BaseEvent):
    type: Literal["message.delta"]
    data: MessageDelta


class MessageCompletedEvent(BaseEvent):
    type: Literal["message.completed"]
    data: MessageCompleted


class ReasoningDeltaEvent(BaseEvent):
    type: Literal["reasoning.delta"]
    data: ReasoningDelta


class ReasoningCompletedEvent(BaseEvent):
    type: Literal["reasoning.completed"]
    data: ReasoningCompleted


class ToolStartedEvent(BaseEvent):
    type: Literal["tool.started"]
    data: ToolStarted


class ToolOutputEvent(BaseEvent):
    type: Literal["tool.output"]
    data: ToolOutput


class ToolCompletedEvent(BaseEvent):
    type: Literal["tool.completed"]
    data: ToolCompleted


class PlanUpdatedEvent(BaseEvent):
    type: Literal["plan.updated"]
    data: PlanUpdated


class ApprovalRequestedEvent(BaseEvent):
    type: Literal["approval.requested"]
    data: ApprovalRequested


class ApprovalResolvedEvent(BaseEvent):
    type: Literal["approval.resolved"]
    data: ApprovalResolved


class QuestionAskedEvent(BaseEvent):
    type: Literal["question.asked"]
    data: QuestionAsked


class QuestionResolvedEvent(BaseEvent):
    type: Literal["question.resolved"]
    data: QuestionResolved


class RetryScheduledEvent(BaseEvent):
    type: Literal["retry.scheduled"]
    data: RetryScheduled


class ProviderSwitchedEvent(BaseEvent):
    type: Literal["provider.switched"]
    data: ProviderSwitched


class UsageEvent(BaseEvent):
    type: Literal["usage"]
    data: UsageReported


class WarningEvent(BaseEvent):
    type: Literal["warning"]
    data: Warning


class UnknownEvent(BaseEvent):
    """An event type this SDK does not know (a newer gateway's): skip it or read ``data``."""

    type: str
    data: dict[str, Any]


KnownEvent = Annotated[
    SessionCreatedEvent
    | SessionProviderSelectedEvent
    | SessionThreadBoundEvent
    | SessionForkedEvent
    | SessionRevertedEvent
    | SessionConfiguredEvent
    | SessionClosedEvent
    | BudgetReachedEvent
    | TurnStartedEvent
    | TurnCompletedEvent
    | TurnFailedEvent
    | TurnInterruptedEvent
    | MessageDeltaEvent
    | MessageCompletedEvent
    | ReasoningDeltaEvent
    | ReasoningCompletedEvent
    | ToolStartedEvent
    | ToolOutputEvent
    | ToolCompletedEvent
    | PlanUpdatedEvent
    | ApprovalRequestedEvent
    | ApprovalResolvedEvent
    | QuestionAskedEvent
    | QuestionResolvedEvent
    | RetryScheduledEvent
    | ProviderSwitchedEvent
    | UsageEvent
    | WarningEvent,
    Field(discriminator="type"),
]
Event = KnownEvent | UnknownEvent
"""Any event of a session's stream."""

TurnEndEvent = TurnCompletedEvent | TurnFailedEvent | TurnInterruptedEvent
TURN_END_TYPES = frozenset({"turn.completed", "turn.failed", "turn.interrupted"})

_known: TypeAdapter[KnownEvent] = TypeAdapter(KnownEvent)
EVENT_CLASSES: tuple[type[BaseEvent], ...] = get_args(get_args(KnownEvent)[0])
EVENT_TYPES: frozenset[str] = frozenset(
    get_args(cls.model_fields["type"].annotation)[0] for cls in EVENT_CLASSES
)
"""Every event type this SDK reads into its own class."""


def parse_event(envelope: dict[str, Any]) -> Event:
    """An envelope as its typed event (``UnknownEvent`` for a type this SDK does not know)."""
    if envelope.get("type") in EVENT_TYPES:
        return _known.validate_python(envelope)
    return UnknownEvent.model_validate(envelope)


def parse_event_json(text: str) -> Event:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("an event is a JSON object")
    return parse_event(value)


class EventPage(Model):
    """A JSON page of events: continue with ``after=next_after`` while it is below
    ``last_seq``."""

    events: list[Event]
    next_after: int
    last_seq: int

"""The unified event vocabulary: one envelope, one typed payload per event type.

Providers produce payloads (``EventData``); the event log wraps each one in the envelope
``{seq, session_id, turn_id, attempt, provider, at, type, data}`` and numbers it. The
``Event`` discriminated union is what clients see on SSE, WebSocket and the JSON page, and
what the OpenAPI document publishes.
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

EventType = Literal[
    "session.created",
    "session.provider_selected",
    "session.thread_bound",
    "session.closed",
    "turn.started",
    "turn.completed",
    "turn.failed",
    "turn.interrupted",
    "message.delta",
    "message.completed",
    "reasoning.delta",
    "reasoning.completed",
    "tool.started",
    "tool.output",
    "tool.completed",
    "plan.updated",
    "approval.requested",
    "approval.resolved",
    "question.asked",
    "question.resolved",
    "retry.scheduled",
    "provider.switched",
    "usage",
    "warning",
]

FailureKind = Literal[
    "rate_limited",
    "overloaded",
    "server_error",
    "network",
    "idle_timeout",
    "auth",
    "invalid_request",
    "context_lost",
    "cli_missing",
    "cli_crashed",
    "interrupted",
    "usage_limit",
    "agent_error",
    "resource_limit",
    "unknown",
]

RETRYABLE_KINDS: frozenset[FailureKind] = frozenset(
    {"rate_limited", "overloaded", "server_error", "network", "idle_timeout", "cli_crashed"}
)
"""Kinds for which another attempt in the same thread may succeed (every provider agrees)."""

ToolKind = Literal["command", "file_change", "mcp", "web_search", "other"]
ApprovalDecision = Literal["allow", "deny", "allow_session"]
ApprovalMode = Literal["ask", "auto_edits", "allow_all", "read_only"]
"""How a session's tool calls are approved: each CLI maps it to its own permission mode."""
APPROVAL_MODES: tuple[ApprovalMode, ...] = ("ask", "auto_edits", "allow_all", "read_only")
SelectionReason = Literal["explicit", "scenario", "default", "fallback"]
RoutingStrategy = Literal[
    "ordered", "lowest_latency", "lowest_cost", "balanced", "round_robin", "least_loaded"
]
"""How the selector ranks the candidates that can serve (README, "Routing strategies")."""
ROUTING_STRATEGIES: tuple[RoutingStrategy, ...] = (
    "ordered",
    "lowest_latency",
    "lowest_cost",
    "balanced",
    "round_robin",
    "least_loaded",
)


class _Payload(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    TYPE: ClassVar[EventType]


class Usage(BaseModel):
    """Token counts of one turn, and its cost when the CLI reports one."""

    model_config = ConfigDict(frozen=True)
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cost_usd: float | None = None

    def __add__(self, other: Usage) -> Usage:
        """Both together (a turn's attempts); the cost is known when either's is."""
        costs = [c for c in (self.cost_usd, other.cost_usd) if c is not None]
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens
            + other.cache_creation_input_tokens,
            cost_usd=sum(costs) if costs else None,
        )


def spent(*usages: Usage | None) -> Usage | None:
    """What several attempts used together; None when none reported usage."""
    known = [usage for usage in usages if usage is not None]
    if not known:
        return None
    total = known[0]
    for usage in known[1:]:
        total = total + usage
    return total


class TurnError(BaseModel):
    """Why a turn failed, in the shared failure taxonomy."""

    model_config = ConfigDict(frozen=True)
    kind: FailureKind
    message: str
    retryable: bool = False
    provider: str | None = None
    exit_code: int | None = None
    stderr_tail: str | None = None
    resets_at: datetime | None = None
    """For ``usage_limit``: when the limit resets, as the CLI reported it (None: unknown)."""
    reason: str | None = None
    """Why the gateway ended the turn when no provider failure did: ``gateway_restart``,
    ``gateway_shutdown``, ``replica_lost`` (the replica running it stopped answering and
    another one ended it), or for ``resource_limit`` which limit (``output_limit``,
    ``line_too_long``, ``memory_limit``, ``process_limit``)."""


class SkippedProvider(BaseModel):
    model_config = ConfigDict(frozen=True)
    provider: str
    reason: str


class CandidateScore(BaseModel):
    """How the routing strategy rated one candidate that could serve (lower is better)."""

    model_config = ConfigDict(frozen=True)
    provider: str
    score: float | None
    """The strategy's figure for it; null under ``ordered`` and while it is being explored."""
    turns: int
    """Turns of this provider in the measured window when it was rated."""
    exploring: bool = False
    """Too few measured turns: tried before the measured ones so its figures can be learnt."""


class ApprovalOption(BaseModel):
    model_config = ConfigDict(frozen=True)
    decision: ApprovalDecision
    label: str


# --- payloads -------------------------------------------------------------------------------


class SessionCreated(_Payload):
    TYPE = "session.created"
    provider: str
    workspace: str
    model: str | None
    approval_mode: str


class SessionProviderSelected(_Payload):
    TYPE = "session.provider_selected"
    provider: str
    reason: SelectionReason
    skipped: list[SkippedProvider] = []
    strategy: RoutingStrategy = "ordered"
    scores: list[CandidateScore] = []
    """Every candidate that could serve, best first (the chosen one leads)."""


class SessionThreadBound(_Payload):
    TYPE = "session.thread_bound"
    thread_id: str


class SessionClosed(_Payload):
    TYPE = "session.closed"
    reason: str


class TurnStarted(_Payload):
    TYPE = "turn.started"
    prompt: str


class TurnCompleted(_Payload):
    TYPE = "turn.completed"
    final_text: str
    usage: Usage | None = None
    stop_reason: str | None = None


class TurnFailed(_Payload):
    TYPE = "turn.failed"
    error: TurnError


class TurnInterrupted(_Payload):
    TYPE = "turn.interrupted"
    reason: str


class MessageDelta(_Payload):
    """Text the CLI streamed for this item: one delta as printed, or several that came
    within ``server.coalesce_deltas_ms`` of each other, joined."""

    TYPE = "message.delta"
    message_id: str
    text: str


class MessageCompleted(_Payload):
    TYPE = "message.completed"
    message_id: str
    text: str


class ReasoningDelta(_Payload):
    """Text the CLI streamed for this item: one delta as printed, or several that came
    within ``server.coalesce_deltas_ms`` of each other, joined."""

    TYPE = "reasoning.delta"
    message_id: str
    text: str


class ReasoningCompleted(_Payload):
    TYPE = "reasoning.completed"
    message_id: str
    text: str


class ToolStarted(_Payload):
    TYPE = "tool.started"
    tool_id: str
    name: str
    kind: ToolKind
    input: dict[str, JsonValue]


class ToolOutput(_Payload):
    """Text the CLI streamed for this item: one delta as printed, or several that came
    within ``server.coalesce_deltas_ms`` of each other, joined."""

    TYPE = "tool.output"
    tool_id: str
    text: str


StreamedText = MessageDelta | ReasoningDelta | ToolOutput
"""Text a CLI streams a piece at a time: consecutive pieces of one item may be joined."""


def item_of(data: StreamedText) -> str:
    """The message or tool a piece of streamed text belongs to."""
    return data.tool_id if isinstance(data, ToolOutput) else data.message_id


def joined(first: StreamedText, texts: list[str]) -> StreamedText:
    """``first`` carrying ``texts`` (its own first) joined: pieces of one item, in order."""
    if len(texts) == 1:
        return first
    return first.model_copy(update={"text": "".join(texts)})


class ToolCompleted(_Payload):
    TYPE = "tool.completed"
    tool_id: str
    status: Literal["completed", "failed", "denied"]
    output: str | None = None
    exit_code: int | None = None


PlanStatus = Literal["pending", "in_progress", "completed"]


class PlanEntry(BaseModel):
    """One step of the agent's plan."""

    model_config = ConfigDict(frozen=True)
    text: str
    status: PlanStatus


class PlanUpdated(_Payload):
    """The agent's plan for the turn, whole each time it changes."""

    TYPE = "plan.updated"
    entries: list[PlanEntry]


class ApprovalRequested(_Payload):
    TYPE = "approval.requested"
    approval_id: str
    tool: str
    input: dict[str, JsonValue]
    options: list[ApprovalOption]
    expires_at: datetime
    title: str | None = None
    tool_id: str | None = None


class ApprovalResolved(_Payload):
    TYPE = "approval.resolved"
    approval_id: str
    decision: ApprovalDecision
    by: Literal["client", "policy", "gateway"]
    reason: Literal[
        "decided", "expired", "cancelled", "session_closed", "gateway_restart", "replica_lost"
    ]
    message: str | None = None
    updated_input: dict[str, JsonValue] | None = None
    """The input the tool runs with when the client edited what the agent asked."""
    updated_by: str | None = None
    """The key (its name) that edited the input."""


class QuestionOption(BaseModel):
    """One answer the agent offers to a question."""

    model_config = ConfigDict(frozen=True)
    label: str
    description: str | None = None


class Question(BaseModel):
    """One question the agent asks; it is answered with offered labels and/or free text."""

    model_config = ConfigDict(frozen=True)
    prompt: str
    header: str | None = None
    """A short tag for the question (a few words), when the agent gives one."""
    options: list[QuestionOption] = []
    multi_select: bool = False
    """More than one offered label may be chosen."""
    free_text: bool = True
    """An answer may be (or add) text of the user's own instead of an offered label."""


class QuestionAnswer(BaseModel):
    """The answer to one question: the offered labels chosen, and/or text of the user's own."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    selected: list[str] = []
    text: str | None = None

    def texts(self) -> list[str]:
        """The answer as the strings a CLI takes: the chosen labels, then the user's text."""
        own = self.text.strip() if self.text is not None else ""
        return [*self.selected, *([own] if own else [])]


class QuestionAsked(_Payload):
    """The agent asks the user; answer with ``POST …/questions/{question_id}`` (one answer per
    question, in order) before ``expires_at``."""

    TYPE = "question.asked"
    question_id: str
    questions: list[Question]
    expires_at: datetime
    tool_id: str | None = None


class QuestionResolved(_Payload):
    """A question's end: answered by a client, or ended by the gateway (no answers)."""

    TYPE = "question.resolved"
    question_id: str
    answers: list[QuestionAnswer] | None
    by: Literal["client", "gateway"]
    reason: Literal[
        "answered", "expired", "cancelled", "session_closed", "gateway_restart", "replica_lost"
    ]
    answered_by: str | None = None
    """The key (its name) that answered."""


class RetryScheduled(_Payload):
    TYPE = "retry.scheduled"
    source: Literal["cli", "gateway"]
    attempt: int
    max_attempts: int | None
    delay_s: float | None
    kind: FailureKind
    message: str | None = None
    resume_at: datetime | None = None
    """When the next attempt starts, for a wait on a usage limit's reset (``kind``
    ``usage_limit``): the reset the CLI reported, plus a second."""


class HandoffSize(BaseModel):
    """How much of the conversation a failover handed to the new agent."""

    model_config = ConfigDict(frozen=True)
    turns: int
    """Earlier turns in the hand-off (whole or summarized)."""
    chars: int
    """Length of the new agent's first prompt."""


class ProviderSwitched(_Payload):
    """The session moved to another provider: a fresh thread there, whose first prompt is a
    hand-off of the conversation so far (``handoff``) when there was one."""

    TYPE = "provider.switched"
    from_provider: str
    to_provider: str
    reason: str
    """The failure kind that ended the provider's part (``usage_limit``, ``auth``, …)."""
    message: str | None = None
    """The failure's message."""
    handoff: HandoffSize | None = None


class UsageReported(_Payload):
    TYPE = "usage"
    usage: Usage


class Warning(_Payload):
    TYPE = "warning"
    message: str
    code: str | None = None


EventData = (
    SessionCreated
    | SessionProviderSelected
    | SessionThreadBound
    | SessionClosed
    | TurnStarted
    | TurnCompleted
    | TurnFailed
    | TurnInterrupted
    | MessageDelta
    | MessageCompleted
    | ReasoningDelta
    | ReasoningCompleted
    | ToolStarted
    | ToolOutput
    | ToolCompleted
    | PlanUpdated
    | ApprovalRequested
    | ApprovalResolved
    | QuestionAsked
    | QuestionResolved
    | RetryScheduled
    | ProviderSwitched
    | UsageReported
    | Warning
)


# --- envelopes (the public, typed shape of every event) -------------------------------------


class EventEnvelope(BaseModel):
    """Fields every event carries; ``seq`` is per session, strictly increasing."""

    seq: int = Field(ge=1)
    session_id: str
    turn_id: str | None = None
    attempt: int | None = None
    provider: str | None = None
    at: datetime


@functools.lru_cache(maxsize=4096)
def _json_text(value: str | None) -> str:
    # The same few ids and types recur in every event of a turn: encoded once each.
    return "null" if value is None else json.dumps(value, ensure_ascii=False)


def stored_time(at: datetime) -> str:
    """``at`` as events keep it: naive UTC text, ``YYYY-MM-DD HH:MM:SS.ffffff`` (what
    SQLAlchemy's SQLite ``DateTime`` writes and reads). Formatted once per event; the wire
    form is cut from it (``encode_event``), live and on replay alike."""
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"naive datetime {at!r}: pass an aware datetime (UTC)")
    if at.tzinfo is not UTC:
        at = at.astimezone(UTC)
    return at.isoformat(" ", "microseconds")[:26]  # without the "+00:00"


def encode_event(
    *,
    seq: int,
    session_id: str,
    turn_id: str | None,
    attempt: int | None,
    provider: str | None,
    at: str,
    type: str,
    data_json: str,
) -> str:
    """An event's wire form (``Event``), built around ``data_json``, its already encoded
    payload: the payload is encoded once, when the event is made, and never decoded again on
    its way to a client (live, replayed from the store or in a page). ``at`` is the time as
    stored (``stored_time``); on the wire it is RFC 3339 UTC with microseconds."""
    return (
        f'{{"seq":{seq},"session_id":{_json_text(session_id)},"turn_id":{_json_text(turn_id)},'
        f'"attempt":{"null" if attempt is None else attempt},"provider":{_json_text(provider)},'
        f'"at":"{at[:10]}T{at[11:26]}Z","type":{_json_text(type)},"data":{data_json}}}'
    )


class SessionCreatedEvent(EventEnvelope):
    type: Literal["session.created"]
    data: SessionCreated


class SessionProviderSelectedEvent(EventEnvelope):
    type: Literal["session.provider_selected"]
    data: SessionProviderSelected


class SessionThreadBoundEvent(EventEnvelope):
    type: Literal["session.thread_bound"]
    data: SessionThreadBound


class SessionClosedEvent(EventEnvelope):
    type: Literal["session.closed"]
    data: SessionClosed


class TurnStartedEvent(EventEnvelope):
    type: Literal["turn.started"]
    data: TurnStarted


class TurnCompletedEvent(EventEnvelope):
    type: Literal["turn.completed"]
    data: TurnCompleted


class TurnFailedEvent(EventEnvelope):
    type: Literal["turn.failed"]
    data: TurnFailed


class TurnInterruptedEvent(EventEnvelope):
    type: Literal["turn.interrupted"]
    data: TurnInterrupted


class MessageDeltaEvent(EventEnvelope):
    type: Literal["message.delta"]
    data: MessageDelta


class MessageCompletedEvent(EventEnvelope):
    type: Literal["message.completed"]
    data: MessageCompleted


class ReasoningDeltaEvent(EventEnvelope):
    type: Literal["reasoning.delta"]
    data: ReasoningDelta


class ReasoningCompletedEvent(EventEnvelope):
    type: Literal["reasoning.completed"]
    data: ReasoningCompleted


class ToolStartedEvent(EventEnvelope):
    type: Literal["tool.started"]
    data: ToolStarted


class ToolOutputEvent(EventEnvelope):
    type: Literal["tool.output"]
    data: ToolOutput


class ToolCompletedEvent(EventEnvelope):
    type: Literal["tool.completed"]
    data: ToolCompleted


class PlanUpdatedEvent(EventEnvelope):
    type: Literal["plan.updated"]
    data: PlanUpdated


class ApprovalRequestedEvent(EventEnvelope):
    type: Literal["approval.requested"]
    data: ApprovalRequested


class ApprovalResolvedEvent(EventEnvelope):
    type: Literal["approval.resolved"]
    data: ApprovalResolved


class QuestionAskedEvent(EventEnvelope):
    type: Literal["question.asked"]
    data: QuestionAsked


class QuestionResolvedEvent(EventEnvelope):
    type: Literal["question.resolved"]
    data: QuestionResolved


class RetryScheduledEvent(EventEnvelope):
    type: Literal["retry.scheduled"]
    data: RetryScheduled


class ProviderSwitchedEvent(EventEnvelope):
    type: Literal["provider.switched"]
    data: ProviderSwitched


class UsageEvent(EventEnvelope):
    type: Literal["usage"]
    data: UsageReported


class WarningEvent(EventEnvelope):
    type: Literal["warning"]
    data: Warning


Event = Annotated[
    SessionCreatedEvent
    | SessionProviderSelectedEvent
    | SessionThreadBoundEvent
    | SessionClosedEvent
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
"""Any event, as sent to clients."""

TERMINAL_TURN_EVENTS: frozenset[EventType] = frozenset(
    {"turn.completed", "turn.failed", "turn.interrupted"}
)

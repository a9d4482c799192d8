"""The envelope every event travels in, its wire encoding, and the unions of every event.

The event log wraps each payload (``EventData``) in the envelope
``{seq, session_id, turn_id, attempt, provider, at, type, data}`` and numbers it; ``Event``
is that envelope typed by its ``type``, the discriminated union clients see.
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from app.events.interaction import (
    ApprovalRequested,
    ApprovalResolved,
    QuestionAsked,
    QuestionResolved,
)
from app.events.items import (
    MessageCompleted,
    MessageDelta,
    PlanUpdated,
    ReasoningCompleted,
    ReasoningDelta,
    ToolCompleted,
    ToolOutput,
    ToolStarted,
)
from app.events.session import (
    ProviderSwitched,
    SessionClosed,
    SessionConfigured,
    SessionCreated,
    SessionForked,
    SessionProviderSelected,
    SessionReverted,
    SessionThreadBound,
)
from app.events.turn import (
    BudgetReached,
    RetryScheduled,
    TurnCompleted,
    TurnFailed,
    TurnInterrupted,
    TurnStarted,
    UsageReported,
    Warning,
)

EventData = (
    SessionCreated
    | SessionProviderSelected
    | SessionThreadBound
    | SessionForked
    | SessionClosed
    | SessionReverted
    | SessionConfigured
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
    | BudgetReached
    | UsageReported
    | Warning
)


class EventEnvelope(BaseModel):
    """Fields every event carries; ``seq`` is per session, strictly increasing."""

    seq: int = Field(ge=1)
    """The event's number in its session, from 1, strictly increasing; the SSE ``id:`` and
    the cursor to resume after."""
    session_id: str
    turn_id: str | None = None
    """The turn it belongs to; null for a session's own events outside a turn."""
    attempt: int | None = None
    """The turn's attempt that produced it (retries and failover count on)."""
    provider: str | None = None
    """The provider that produced it, when one did."""
    at: datetime
    """When it was stored, RFC 3339 UTC with microseconds."""


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


class SessionForkedEvent(EventEnvelope):
    type: Literal["session.forked"]
    data: SessionForked


class SessionClosedEvent(EventEnvelope):
    type: Literal["session.closed"]
    data: SessionClosed


class SessionRevertedEvent(EventEnvelope):
    type: Literal["session.reverted"]
    data: SessionReverted


class SessionConfiguredEvent(EventEnvelope):
    type: Literal["session.configured"]
    data: SessionConfigured


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


class BudgetReachedEvent(EventEnvelope):
    type: Literal["budget.reached"]
    data: BudgetReached


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
    | SessionForkedEvent
    | SessionClosedEvent
    | SessionRevertedEvent
    | SessionConfiguredEvent
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
    | BudgetReachedEvent
    | UsageEvent
    | WarningEvent,
    Field(discriminator="type"),
]
"""Any event, as sent to clients."""

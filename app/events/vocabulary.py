"""The closed sets events speak in, and the base every event payload is built on."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict

EventType = Literal[
    "session.created",
    "session.provider_selected",
    "session.thread_bound",
    "session.forked",
    "session.closed",
    "session.reverted",
    "session.configured",
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
    "budget.reached",
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
    "budget_exceeded",
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
BudgetScope = Literal["session", "key_daily", "key_monthly"]
"""Whose budget: the session's own, or its key's for the calendar day or month (UTC)."""
BudgetMeasure = Literal["cost_usd", "tokens"]
"""What a budget counts: the cost the CLIs report, or input plus output tokens."""
ForkConversation = Literal["native", "handoff"]
"""How a fork carries the conversation: the agent's own fork of the thread, or a hand-off."""
SelectionReason = Literal["explicit", "scenario", "default", "fallback"]
RoutingStrategy = Literal[
    "ordered", "lowest_latency", "lowest_cost", "balanced", "round_robin", "least_loaded"
]
"""How the selector ranks the candidates that can serve (docs/concepts/selection.md)."""
ROUTING_STRATEGIES: tuple[RoutingStrategy, ...] = (
    "ordered",
    "lowest_latency",
    "lowest_cost",
    "balanced",
    "round_robin",
    "least_loaded",
)


TERMINAL_TURN_EVENTS: frozenset[EventType] = frozenset(
    {"turn.completed", "turn.failed", "turn.interrupted"}
)


class Payload(BaseModel):
    """The data of one event type: frozen, no unknown fields, its type as ``TYPE``."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    TYPE: ClassVar[EventType]

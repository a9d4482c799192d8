"""The data of a turn's own events: started, its end (completed, failed, interrupted), the
retries between its attempts, what it used, and warnings."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from app.events.vocabulary import BudgetMeasure, BudgetScope, FailureKind, Payload


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
    another one ended it), for ``resource_limit`` which limit (``output_limit``,
    ``line_too_long``, ``memory_limit``, ``process_limit``), for ``budget_exceeded`` which
    budget (``session``, ``key_daily``, ``key_monthly``)."""


class ChangesSummary(BaseModel):
    """What a turn changed in its workspace, in short (``GET …/changes`` has the files)."""

    model_config = ConfigDict(frozen=True)
    files: int
    additions: int
    """Lines added, over every text file."""
    deletions: int
    """Lines deleted, over every text file."""


class TurnStarted(Payload):
    TYPE = "turn.started"
    prompt: str


class TurnCompleted(Payload):
    TYPE = "turn.completed"
    final_text: str
    usage: Usage | None = None
    stop_reason: str | None = None
    changes: ChangesSummary | None = None
    """What the turn changed in the workspace; null when it was not recorded (snapshots
    off, or the workspace over their cap: a ``warning`` says so)."""


class TurnFailed(Payload):
    TYPE = "turn.failed"
    error: TurnError


class TurnInterrupted(Payload):
    TYPE = "turn.interrupted"
    reason: str


class RetryScheduled(Payload):
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


class UsageReported(Payload):
    TYPE = "usage"
    usage: Usage


class BudgetReached(Payload):
    """A budget is spent: what the session (or its key, this day or month) used has reached
    its maximum. A turn still running is stopped (``turn.failed``, ``budget_exceeded``) and
    later turns are refused until the budget resets (a session's never does)."""

    TYPE = "budget.reached"
    budget: BudgetScope
    measure: BudgetMeasure
    limit: float
    """The budget's maximum (``max_cost_usd`` or ``max_tokens``)."""
    used: float
    """What was used when it was reached: ended turns, plus what this turn reported so far."""
    key: str | None = None
    """The key (its name) the session belongs to."""
    resets_at: datetime | None = None
    """When a key's budget starts over (the next UTC day or month); null for a session's."""


class Warning(Payload):
    TYPE = "warning"
    message: str
    code: str | None = None

"""Typed records the gateway returns (the schemas of docs/openapi.json, by their SDK names).

Written by hand, field for field: a test compares them with the OpenAPI document, so a field
the gateway adds is caught, and each ``Literal`` holds exactly the document's enum. Fields the
gateway adds later are kept (``model_extra``) rather than refused.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ApprovalMode = Literal["ask", "auto_edits", "allow_all", "read_only"]
Strategy = Literal[
    "ordered", "lowest_latency", "lowest_cost", "balanced", "round_robin", "least_loaded"
]
Capability = Literal[
    "text_deltas",
    "approvals",
    "interrupt",
    "resume",
    "usage",
    "cost",
    "shared_process",
    "approval_edits",
    "model_choice",
    "fork",
]
SessionStatus = Literal["idle", "running", "awaiting_approval", "retrying", "closed", "failed"]
TurnStatus = Literal["queued", "running", "retrying", "completed", "failed", "interrupted"]
Decision = Literal["allow", "deny", "allow_session"]
ApprovalStatus = Literal["pending", "allowed", "denied", "expired", "cancelled"]
QuestionStatus = Literal["pending", "answered", "expired", "cancelled"]
UsageLimitPolicy = Literal["wait", "fallback", "fail"]
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
SelectionReason = Literal["explicit", "scenario", "default", "fallback"]
HealthStatus = Literal["available", "needs_login", "unavailable"]
FileStatus = Literal["added", "modified", "deleted", "renamed"]


class Model(BaseModel):
    """Base of every record: immutable, and tolerant of fields a newer gateway adds."""

    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)


# --- usage -------------------------------------------------------------------------------------


class Usage(Model):
    """What a turn or an attempt used, as its CLI reported it."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cost_usd: float | None = None


class UsageTotals(Usage):
    """Usage summed over ended turns (``turns`` of them)."""

    turns: int = 0


class UsageGroup(Model):
    key: str | None
    provider: str
    model: str | None
    usage: UsageTotals


class BudgetAmounts(Model):
    """Cost and tokens of a budget (used, or left; None: not limited)."""

    cost_usd: float | None
    tokens: int | None


class SessionBudget(Model):
    """A session's budget: its limits, what its turns used and what is left."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None
    used: BudgetAmounts
    left: BudgetAmounts
    reached: bool


class KeyBudget(SessionBudget):
    """A key's budget for one period (``daily``, ``monthly``), reset at ``resets_at``."""

    key: str
    period: Literal["daily", "monthly"]
    resets_at: datetime


class UsageReport(Model):
    """``GET /v1/usage``: usage by key, provider and model over ``[from, to)``, and each
    key's budgets."""

    from_: datetime = Field(alias="from")
    to: datetime
    groups: list[UsageGroup]
    total: UsageTotals
    budgets: list[KeyBudget] = []


# --- sessions ----------------------------------------------------------------------------------


class RetryPolicy(Model):
    """A retry policy to ask for (every field optional: the gateway's defaults fill in)."""

    enabled: bool | None = None
    strategy: str | None = None
    usage_limit: UsageLimitPolicy | None = None
    usage_limit_max_wait_s: float | None = None


class RetryPolicyInfo(Model):
    """The retry policy a turn runs under."""

    enabled: bool
    strategy: str
    delays_s: list[float]
    max_attempts: int
    usage_limit: UsageLimitPolicy
    usage_limit_max_wait_s: float


class CandidateScore(Model):
    provider: str
    score: float | None
    turns: int
    exploring: bool = False


class SkippedCandidate(Model):
    provider: str
    reason: str


class Selection(Model):
    """Why the session got its provider, and which ones were passed over."""

    reason: SelectionReason
    skipped: list[SkippedCandidate] = []
    scenario: str | None = None
    strategy: Strategy = "ordered"
    scores: list[CandidateScore] = []
    requires: list[str] = []
    fallback: bool = False


class ProcessInfo(Model):
    """The session's live CLI process."""

    pid: int
    started_at: datetime
    spawns: int


class SessionInfo(Model):
    """A session as the gateway last reported it."""

    id: str
    title: str | None = None
    """``metadata.title``, else the start of the first prompt (None: neither yet)."""
    provider: str
    selection: Selection | None
    workspace: str
    model: str | None
    approval_mode: ApprovalMode
    status: SessionStatus
    thread_id: str | None
    created_at: datetime
    updated_at: datetime
    last_seq: int
    usage: UsageTotals
    closed_at: datetime | None = None
    metadata: dict[str, Any] | None = None
    owner: str | None = None
    process: ProcessInfo | None = None
    repository: str | None = None
    branch: str | None = None
    base: str | None = None
    forked_from: str | None = None
    forked_at: str | None = None
    budget: SessionBudget | None = None


# --- turns -------------------------------------------------------------------------------------


class TurnError(Model):
    """Why a turn failed: ``kind`` is the shared failure taxonomy."""

    kind: FailureKind
    message: str
    retryable: bool = False
    provider: str | None = None
    exit_code: int | None = None
    stderr_tail: str | None = None
    reason: str | None = None
    resets_at: datetime | None = None


class Turn(Model):
    """One prompt and the agent's whole answer to it."""

    id: str
    session_id: str
    number: int
    status: TurnStatus
    attempts: int
    provider: str
    prompt: str
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    usage: Usage | None = None
    error: TurnError | None = None
    final_text: str | None = None
    retry: RetryPolicyInfo | None = None
    resume_at: datetime | None = None
    changes: str | None = None
    """The URL of what the turn changed in the workspace."""


class InterruptAccepted(Model):
    session_id: str
    turn_id: str
    status: Literal["interrupting"] = "interrupting"


# --- approvals and questions -------------------------------------------------------------------


class ApprovalOption(Model):
    decision: Decision
    label: str


class Approval(Model):
    """A tool call the agent asked to make, and what became of it."""

    id: str
    session_id: str
    turn_id: str | None
    status: ApprovalStatus
    tool: str
    input: dict[str, Any]
    created_at: datetime
    expires_at: datetime
    title: str | None = None
    decision: Decision | None = None
    decided_at: datetime | None = None
    decided_by: str | None = None
    message: str | None = None
    updated_input: dict[str, Any] | None = None
    updated_by: str | None = None


class QuestionOption(Model):
    label: str
    description: str | None = None


class Question(Model):
    """One question the agent asks, with its options."""

    prompt: str
    header: str | None = None
    options: list[QuestionOption] = []
    multi_select: bool = False
    free_text: bool = True


class Answer(Model):
    """The answer to one question: options chosen by label, and/or free text."""

    selected: list[str] = []
    text: str | None = None


class QuestionRequest(Model):
    """Questions the agent asked together, and the answers they got."""

    id: str
    session_id: str
    turn_id: str | None
    status: QuestionStatus
    tool: str
    questions: list[Question]
    created_at: datetime
    expires_at: datetime
    answers: list[Answer] | None = None
    answered_by: str | None = None
    resolved_at: datetime | None = None


# --- workspace changes -------------------------------------------------------------------------


class ChangedFile(Model):
    path: str
    status: FileStatus
    additions: int
    deletions: int
    binary: bool
    old_path: str | None = None


class Changes(Model):
    """What changed in the workspace between two recorded states."""

    session_id: str
    from_: str = Field(alias="from")
    to: str
    files: list[ChangedFile]
    additions: int
    deletions: int
    diff: str
    diff_truncated: bool = False


class Revert(Model):
    """The files a revert put back as they were when ``to_turn`` started."""

    session_id: str
    to_turn: str
    turn_number: int
    files: list[ChangedFile]
    additions: int
    deletions: int


# --- runs and providers ------------------------------------------------------------------------


class ProviderSwitch(Model):
    from_provider: str
    to_provider: str
    reason: str


class RunResult(Model):
    """``POST /v1/runs``: the one turn's outcome."""

    session_id: str
    turn_id: str
    provider: str
    status: TurnStatus
    attempts: int
    final_text: str | None
    usage: Usage | None
    error: TurnError | None
    switches: list[ProviderSwitch]


class Capabilities(Model):
    text_deltas: bool
    approvals: bool
    interrupt: bool
    resume: bool
    usage: bool
    cost: bool
    shared_process: bool
    approval_edits: bool
    model_choice: bool
    fork: bool = False


class Health(Model):
    """Whether a provider can take a turn now: ``needs_login`` when its CLI has no credential
    (``reason`` says how to log in), ``unavailable`` when it is disabled, missing or broken."""

    status: HealthStatus
    available: bool
    """``status == "available"``."""
    reason: str | None
    checked_at: datetime


class SandboxInfo(Model):
    mode: Literal["bwrap", "none"]
    reason: str


class Figures(Model):
    """A provider's measured figures (routing strategies use them)."""

    turns: int
    first_text_p50_s: float | None
    duration_p50_s: float | None
    failure_rate: float | None
    cost_per_turn_usd: float | None
    running: int


class Provider(Model):
    name: str
    enabled: bool
    capabilities: Capabilities | None
    executable: str
    installed_version: str | None
    pinned_version: str | None
    health: Health
    sandbox: SandboxInfo
    figures: Figures


class LimitEnforcement(Model):
    memory: Literal["cgroup", "rlimit", "watchdog"]
    processes: Literal["cgroup", "rlimit", "watchdog"]
    detail: str


class Readiness(Model):
    status: Literal["ready", "not_ready"]
    checks: dict[str, str]
    reasons: list[str] = []
    limits: LimitEnforcement | None = None

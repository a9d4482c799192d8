"""Request and response bodies of the v1 API (``XCreate`` in, ``XPublic`` out)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StringConstraints,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from app.api.budgetviews import BudgetIn, KeyBudgetPublic, SessionBudgetPublic
from app.api.fields import WORKSPACE_PATTERN as WORKSPACE_PATTERN  # noqa: PLC0414 - re-exported
from app.api.fields import (
    BranchName,
    GitRef,
    ModelName,
    ProviderName,
    StrategyName,
    Workspace,
)
from app.api.fields import Timestamp as Timestamp  # noqa: PLC0414 - re-exported
from app.api.fields import provider_name_schema as provider_name_schema  # noqa: PLC0414
from app.api.text import check_text
from app.events import (
    ApprovalDecision,
    ApprovalMode,
    CandidateScore,
    Event,
    Question,
    QuestionAnswer,
    RoutingStrategy,
    SelectionReason,
    TurnError,
    Usage,
)
from app.providers.base import Capability
from app.runtime.commands import Configure
from app.runtime.requests import SessionRequest
from app.settings import UsageLimitAction

SessionStatus = Literal["idle", "running", "awaiting_approval", "retrying", "closed", "failed"]
TurnStatus = Literal["queued", "running", "retrying", "completed", "failed", "interrupted"]
ApprovalStatus = Literal["pending", "allowed", "denied", "expired", "cancelled"]
QuestionStatus = Literal["pending", "answered", "expired", "cancelled"]


class _In(BaseModel):
    """A request body or WebSocket frame: unknown fields and text that is not valid Unicode
    (app/api/text.py) are refused before any field is read."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _unicode_text(cls, data: Any) -> Any:
        check_text(cls.__name__, data)
        return data


class RetryPolicyIn(_In):
    enabled: bool | None = None
    strategy: StrategyName | None = None
    usage_limit: UsageLimitAction | None = None
    """When the agent hits its usage limit: ``wait`` for the reset it reported and continue
    in the same thread, ``fallback`` to the next provider (sessions with ``fallback``), or
    ``fail``; the default is ``retry.usage_limit``."""
    usage_limit_max_wait_s: Annotated[float, Field(gt=0, le=7 * 24 * 3600)] | None = None
    """The longest wait for a usage limit's reset; default ``retry.usage_limit_max_wait_s``."""


class SessionOptions(_In):
    """What creating a session and starting a run ask alike."""

    provider: ProviderName | None = None
    scenario: Annotated[str, StringConstraints(max_length=64)] | None = None
    workspace: Workspace
    model: ModelName | None = None
    approval_mode: ApprovalMode | None = None
    retry: RetryPolicyIn | None = None
    requires: list[Capability] = Field(default=[], max_length=16)
    strategy: RoutingStrategy | None = None
    """How to rank the candidates that can serve (docs/concepts/selection.md); else the
    scenario's strategy (``selection.strategies``), else ``selection.strategy``. Ignored
    with an explicit ``provider``, which is never substituted."""
    fallback: bool | None = None
    """When the provider fails for good (retries spent, usage limit, auth, CLI missing or
    unavailable), move the session to the next provider of its chain, which gets a hand-off
    of the conversation so far (docs/concepts/failover.md); default ``selection.failover``, or
    true for scenarios in ``selection.failover_scenarios``. An explicit provider moves
    only with ``fallback: true`` (it serves first); runs always fall back unless the
    provider is explicit."""
    budget: BudgetIn | None = None
    """What the session may spend in all (docs/concepts/usage.md); its key's budgets apply too."""

    def session_request(
        self, *, owner: str | None, metadata: dict[str, JsonValue] | None = None
    ) -> SessionRequest:
        return SessionRequest(
            workspace=self.workspace,
            provider=self.provider,
            scenario=self.scenario,
            model=self.model,
            approval_mode=self.approval_mode,
            retry=self.retry.model_dump(exclude_none=True) if self.retry else None,
            requires=self.requires,
            strategy=self.strategy,
            fallback=self.fallback,
            metadata=metadata,
            owner=owner,
            budget=self.budget.stored() if self.budget else None,
        )


class SessionCreate(SessionOptions):
    """A session in ``workspace`` (a directory), or in a Git worktree of its own of
    ``repository`` (exactly one of the two)."""

    workspace: Workspace | None = None  # type: ignore[assignment]  # or `repository`
    repository: Workspace | None = None
    """A Git repository inside a workspace root (the top of its work tree, or a bare one):
    the session gets a worktree of it of its own, under the gateway's worktrees root, on a
    new branch; the session's ``workspace`` is that worktree. Deleting the session removes
    the worktree and keeps the branch."""
    ref: GitRef | None = None
    """With ``repository``: what the worktree checks out (a branch, tag or commit); default
    the repository's ``HEAD``."""
    branch: BranchName | None = None
    """With ``repository``: the worktree's new branch (it must not exist: 409
    ``branch_exists``); default ``agent/<session id>``."""
    metadata: dict[Annotated[str, StringConstraints(max_length=128)], JsonValue] | None = Field(
        default=None, max_length=64
    )

    @model_validator(mode="after")
    def _one_place(self) -> SessionCreate:
        if (self.workspace is None) == (self.repository is None):
            raise ValueError(
                "give exactly one of `workspace` (a directory to work in) and `repository` "
                "(a Git repository the session gets a worktree of)"
            )
        if self.repository is None and (self.ref is not None or self.branch is not None):
            raise ValueError("`ref` and `branch` go only with `repository`, not `workspace`")
        return self

    def session_request(
        self, *, owner: str | None, metadata: dict[str, JsonValue] | None = None
    ) -> SessionRequest:
        return replace(
            super().session_request(owner=owner, metadata=metadata),
            repository=self.repository,
            ref=self.ref,
            branch=self.branch,
        )


class SkippedCandidate(BaseModel):
    provider: str
    reason: str


class Selection(BaseModel):
    reason: SelectionReason
    skipped: list[SkippedCandidate] = []
    strategy: RoutingStrategy = "ordered"
    """The routing strategy that ranked the candidates."""
    scores: list[CandidateScore] = []
    """Every candidate that could serve, best first, with its score (lower is better)."""
    fallback: bool = False
    """The session moves to the next provider of its chain when this one fails for good."""
    scenario: str | None = None
    requires: list[str] = []
    """The capabilities every provider of the session (failover included) must have."""


class ProcessPublic(BaseModel):
    """The live CLI process serving the session (absent when none is running)."""

    pid: int
    started_at: datetime
    spawns: int


class UsageTotalsPublic(BaseModel):
    """Usage summed over ended turns, each as its final attempt reported it."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cost_usd: float | None = None
    """Null when no turn counted here reported a cost (OpenCode and Claude Code do)."""
    turns: int = 0
    """The ended turns counted (completed, failed or interrupted)."""


class SessionPublic(BaseModel):
    id: str
    title: str | None = None
    """What lists show: ``metadata.title``, else the start of the first prompt, on one line
    and cut at 120 characters (null: untitled and no prompt sent yet)."""
    provider: str
    selection: Selection | None
    workspace: str
    """The directory the agent works in: as named, or the session's worktree."""
    repository: str | None = None
    """The repository the session's worktree belongs to (null: a plain workspace)."""
    branch: str | None = None
    """The worktree's branch; it stays in the repository after the session is deleted."""
    base: str | None = None
    """The commit the branch was made at."""
    forked_from: str | None = None
    """For a fork: the session it was forked from (null: not a fork)."""
    forked_at: str | None = None
    """For a fork: the turn of ``forked_from`` it holds the files and conversation up to."""
    model: str | None
    approval_mode: ApprovalMode
    status: SessionStatus
    thread_id: str | None
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None = None
    last_seq: int
    metadata: dict[str, JsonValue] | None = None
    process: ProcessPublic | None = None
    owner: str | None = None
    """With several replicas, the replica (``cluster.replica_id``) that runs this session's
    CLI; null when none holds it, and on a single gateway."""
    usage: UsageTotalsPublic
    """What the session's ended turns used, summed when it is read."""
    budget: SessionBudgetPublic | None = None
    """The session's own budget, with what is used and left (null: it has none)."""


class SessionList(BaseModel):
    sessions: list[SessionPublic]


class UsageGroupPublic(BaseModel):
    key: str | None
    """The key (its name) that created the sessions; null for sessions without one."""
    provider: str
    model: str | None
    """The model the sessions named; null: each CLI's default."""
    usage: UsageTotalsPublic


class UsageReport(BaseModel):
    """Usage of the turns that ended in ``[from, to)``, by key, provider and model."""

    model_config = ConfigDict(populate_by_name=True)
    from_: datetime = Field(alias="from")
    to: datetime
    groups: list[UsageGroupPublic]
    """Most tokens (input + output) first."""
    total: UsageTotalsPublic
    budgets: list[KeyBudgetPublic] = []
    """Every key's budgets for the current day and month (not the range asked), with what
    is used and left."""


class TurnCreate(_In):
    prompt: Annotated[str, StringConstraints(min_length=1, max_length=512 * 1024)]
    retry: RetryPolicyIn | None = None


class SessionForkCreate(_In):
    at_turn: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None
    """The session's completed turn the fork holds the files and the conversation up to
    (inclusive); default its last completed turn."""


class SessionSettingsIn(_In):
    """What a client changes of a session between its turns; each field left out stays as
    it is (``null`` is refused: leave the field out)."""

    model: ModelName | SkipJsonSchema[None] = None
    """The model the agent runs (only a provider with ``model_choice`` takes one)."""
    approval_mode: ApprovalMode | SkipJsonSchema[None] = None
    """One of the modes this gateway enables (``sessions.allowed_approval_modes``)."""
    provider: ProviderName | SkipJsonSchema[None] = None
    """Only before the session's first turn (else 409 ``provider_fixed``); without ``model``
    the session takes the model configured for it."""

    @model_validator(mode="before")
    @classmethod
    def _given(cls, data: Any) -> Any:
        if isinstance(data, dict):
            given = {name: value for name, value in data.items() if name != "type"}
            nulls = sorted(name for name, value in given.items() if value is None)
            if nulls:
                raise ValueError(
                    f"{', '.join(nulls)}: null is not a value here; leave a field out to keep "
                    "it as it is"
                )
            if not given:
                raise ValueError("give at least one of model, approval_mode and provider")
        return data

    def command(self, session_id: str) -> Configure:
        return Configure(
            session_id=session_id,
            model=self.model,
            approval_mode=self.approval_mode,
            provider=self.provider,
        )


class SessionConfigure(SessionSettingsIn):
    """Change a session's model, approval mode or provider (at least one)."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})


class RetryPolicyPublic(BaseModel):
    """The retry policy fixed when the turn was created; configuration changed since does not
    touch it."""

    enabled: bool
    strategy: str
    delays_s: list[float]
    """The wait before each retry attempt, in order."""
    max_attempts: int
    """1 plus one attempt per delay when enabled, else 1."""
    usage_limit: UsageLimitAction
    """What a usage limit does: ``wait`` for its reset, ``fallback``, or ``fail``."""
    usage_limit_max_wait_s: float


class TurnPublic(BaseModel):
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
    resume_at: datetime | None = None
    """While the turn waits for a usage limit's reset (status ``retrying``): when it goes on
    in the same thread. The wait is stored and survives a restart of the gateway."""
    usage: Usage | None = None
    error: TurnError | None = None
    final_text: str | None = None
    retry: RetryPolicyPublic | None = None
    """The turn's retry policy snapshot (absent only on turns stored before it was kept)."""
    changes: str | None = None
    """Where what the turn changed in the workspace is (``GET …/changes?from=<id>&to=<id>``)."""


class TurnList(BaseModel):
    turns: list[TurnPublic]


class ApprovalRespond(_In):
    decision: ApprovalDecision
    message: Annotated[str, StringConstraints(max_length=8192)] | None = None
    updated_input: dict[str, JsonValue] | None = None


class ApprovalPublic(BaseModel):
    id: str
    session_id: str
    turn_id: str | None
    status: ApprovalStatus
    tool: str
    input: dict[str, JsonValue]
    title: str | None = None
    decision: ApprovalDecision | None = None
    message: str | None = None
    decided_by: str | None = None
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None = None
    updated_input: dict[str, JsonValue] | None = None
    """The input the tool ran with when the client edited ``input`` (what the agent asked)."""
    updated_by: str | None = None
    """The key (its name) that edited the input."""


class ApprovalList(BaseModel):
    approvals: list[ApprovalPublic]


class QuestionAnswerIn(_In):
    """The answer to one question: offered labels chosen (``selected``; one unless the
    question is ``multi_select``) and/or an answer of the user's own (``text``, where the
    question is ``free_text``)."""

    selected: Annotated[
        list[Annotated[str, StringConstraints(max_length=1024)]], Field(max_length=64)
    ] = []
    text: Annotated[str, StringConstraints(max_length=8192)] | None = None

    def answer(self) -> QuestionAnswer:
        return QuestionAnswer(selected=list(self.selected), text=self.text)


QuestionAnswers = Annotated[list[QuestionAnswerIn], Field(min_length=1, max_length=64)]


class QuestionReply(_In):
    """One answer per question of ``question.asked``, in the order asked."""

    answers: QuestionAnswers


class QuestionPublic(BaseModel):
    id: str
    session_id: str
    turn_id: str | None
    status: QuestionStatus
    tool: str
    """The agent's tool that asked (``AskUserQuestion``, ``question``)."""
    questions: list[Question]
    answers: list[QuestionAnswer] | None = None
    answered_by: str | None = None
    """The key (its name) that answered."""
    created_at: datetime
    expires_at: datetime
    resolved_at: datetime | None = None


class QuestionList(BaseModel):
    questions: list[QuestionPublic]


class InterruptAccepted(BaseModel):
    session_id: str
    turn_id: str
    status: Literal["interrupting"] = "interrupting"


class EventPage(BaseModel):
    """A page of a session's events; pass ``next_after`` as ``after`` for the next page."""

    events: list[Event]
    next_after: int
    last_seq: int


class Problem(BaseModel):
    """An ``application/problem+json`` error (RFC 9457); extra fields vary by ``type``."""

    model_config = ConfigDict(extra="allow")
    type: str
    """``urn:agent-gateway:problem:<slug>``; the slug is stable, match on it."""
    title: str
    status: int
    detail: str


class FieldProblem(BaseModel):
    """One field of a request that failed validation."""

    location: str
    """Where: ``body.workspace``, ``query.limit``, ``header.Last-Event-ID``…"""
    message: str


class ValidationProblem(Problem):
    """A 422 problem; ``errors`` lists each failing field when the request did not match
    the schema (``validation_failed``), and is absent when a well-formed value was refused."""

    errors: list[FieldProblem] = []

"""The data of a session's own events: created, its provider chosen or switched, its thread
bound, forked, reverted, configured, closed."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from app.events.turn import ChangesSummary
from app.events.vocabulary import (
    ApprovalMode,
    ForkConversation,
    Payload,
    RoutingStrategy,
    SelectionReason,
)


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


class HandoffSize(BaseModel):
    """How much of the conversation a failover handed to the new agent."""

    model_config = ConfigDict(frozen=True)
    turns: int
    """Earlier turns in the hand-off (whole or summarized)."""
    chars: int
    """Length of the new agent's first prompt."""


class SessionCreated(Payload):
    TYPE = "session.created"
    provider: str
    workspace: str
    model: str | None
    approval_mode: str
    repository: str | None = None
    """For a session on a Git worktree of its own (``workspace``): the repository."""
    branch: str | None = None
    """The worktree's branch, made for the session."""
    base: str | None = None
    """The commit the branch was made at."""


class SessionProviderSelected(Payload):
    TYPE = "session.provider_selected"
    provider: str
    reason: SelectionReason
    skipped: list[SkippedProvider] = []
    strategy: RoutingStrategy = "ordered"
    scores: list[CandidateScore] = []
    """Every candidate that could serve, best first (the chosen one leads)."""


class SessionThreadBound(Payload):
    TYPE = "session.thread_bound"
    thread_id: str


class SessionForked(Payload):
    """A session was forked: told on the session forked (``parent_id``) and on the new one
    (``child_id``), with the same data."""

    TYPE = "session.forked"
    parent_id: str
    """The session forked."""
    child_id: str
    """The new session."""
    at_turn: str
    """The parent's turn the fork holds the conversation and the files up to (inclusive)."""
    turn_number: int
    """That turn's number in the parent."""
    conversation: ForkConversation
    """``native``: the agent's own fork of the parent's thread; ``handoff``: the new
    session's first prompt carries the conversation up to ``at_turn`` (a fresh thread)."""
    handoff: HandoffSize | None = None
    """With ``handoff``: how much of the conversation it carries."""


class SessionClosed(Payload):
    TYPE = "session.closed"
    reason: str
    kept_branch: str | None = None
    """For a session on a Git worktree: its worktree was removed, and this branch, with
    every commit on it, is kept in the repository."""


class ProviderSwitched(Payload):
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


class ChangedFile(BaseModel):
    """One file that differs between two states of a workspace."""

    model_config = ConfigDict(frozen=True)
    path: str
    """Where the file is (where it was, for a deleted one), relative to the workspace."""
    status: Literal["added", "modified", "deleted", "renamed"]
    old_path: str | None = None
    """Where a renamed file was."""
    additions: int
    deletions: int
    binary: bool
    """A binary file: no lines counted (``?format=patch`` carries its bytes)."""


class SessionReverted(Payload):
    """The workspace's files were put back as they were when ``to_turn`` started; the
    agent's next prompt is told so."""

    TYPE = "session.reverted"
    to_turn: str
    turn_number: int
    files: list[ChangedFile]
    """What the revert changed, from the workspace as it was to that turn's start."""
    changes: ChangesSummary
    by: str
    """The key that asked."""


class SessionConfigured(Payload):
    """The session's model, approval mode or provider changed between turns: each field is
    its value now (changed or not); its next turn runs with them."""

    TYPE = "session.configured"
    model: str | None
    """Null: the agent's own default model."""
    approval_mode: ApprovalMode
    provider: str
    by: str
    """The key that asked."""

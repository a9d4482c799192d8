"""What a caller asks for when it creates a session, or a run (which makes one)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from app.events import ApprovalMode


@dataclass(frozen=True, kw_only=True)
class SessionRequest:
    """A new session's wishes, as the API took them; ``Sessions.create`` validates
    them against this gateway (approval modes, retry strategies, workspace roots, providers)
    before anything is stored."""

    workspace: str | None = None
    """The directory the agent works in, as named; else ``repository``."""
    repository: str | None = None
    """A Git repository the session gets a worktree of (``app/runtime/worktrees.py``)."""
    ref: str | None = None
    """What the worktree checks out (default the repository's ``HEAD``)."""
    branch: str | None = None
    """The worktree's new branch (default ``agent/<session id>``)."""
    provider: str | None = None
    """An explicit provider (moves only with ``fallback`` true); else the scenario's chain,
    else the default."""
    scenario: str | None = None
    model: str | None = None
    approval_mode: ApprovalMode | None = None
    retry: dict[str, JsonValue] | None = None
    requires: Sequence[str] = ()
    """Capabilities the chosen provider must have."""
    strategy: str | None = None
    """The routing strategy (docs/concepts/selection.md); else the scenario's, else
    ``selection.strategy``. An unknown name is refused with 422."""
    fallback: bool | None = None
    """Move to the next provider of the chain, with a hand-off, when this one fails for
    good; None: ``selection.failover`` (or the scenario's, ``selection.failover_scenarios``).
    An explicit provider moves only when this is true."""
    metadata: dict[str, JsonValue] | None = None
    owner: str | None = None
    """The key that owns the session (None: the admin token's)."""
    budget: dict[str, JsonValue] | None = None
    """What the session may spend in all: ``{"max_cost_usd"?, "max_tokens"?}``."""

"""What the gateway keeps, as plain records: what storage (``app.store.interface.Storage``)
returns and takes, and what the runtime and the API work with. No ORM row leaves the store.

Timestamps are aware UTC; JSON-like fields are plain ``dict``/``list`` values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import JsonValue

from app.events import ApprovalDecision, EventType

SessionStatus = Literal["idle", "running", "awaiting_approval", "retrying", "closed", "failed"]
TurnStatus = Literal["queued", "running", "retrying", "completed", "failed", "interrupted"]
ApprovalStatus = Literal["pending", "allowed", "denied", "answered", "expired", "cancelled"]
RequestKind = Literal["tool", "question"]
"""What a pending request asks a client: to allow a tool call, or to answer the agent's
questions."""

ENDED_SESSION_STATUSES: tuple[SessionStatus, ...] = ("closed", "failed")
"""A session in one of these statuses never runs another turn."""
LIVE_TURN_STATUSES: tuple[TurnStatus, ...] = ("queued", "running", "retrying")
"""A turn in one of these statuses has not ended."""
BUSY_SESSION_STATUSES: tuple[SessionStatus, ...] = ("running", "awaiting_approval", "retrying")
"""A session in one of these statuses is running a turn."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionRecord:
    """A gateway session; ``last_seq`` is the ``seq`` of its newest event (0 before any)."""

    id: str
    owner: str | None
    provider: str
    workspace: str
    model: str | None
    approval_mode: str
    status: SessionStatus
    retry: dict[str, JsonValue] | None = None
    metadata: dict[str, JsonValue] | None = None
    selection: dict[str, JsonValue] | None = None
    last_seq: int = 0
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None = None
    repository: str | None = None
    """The repository the session's workspace is a Git worktree of (None: a plain
    workspace, as named)."""
    branch: str | None = None
    """The worktree's own branch, made for the session and kept after it."""
    base: str | None = None
    """The commit the branch was made at."""
    git_dir: str | None = None
    """The repository's common Git directory, which the session's agent may write."""
    forked_from: str | None = None
    """The session this one was forked from (None: not a fork)."""
    forked_at: str | None = None
    """The turn of ``forked_from`` the fork holds the conversation and files up to."""
    fork_start: dict[str, JsonValue] | None = None
    """What the fork's first thread starts from, until it has one: ``{"handoff": prompt}``
    (told before its first prompt) or ``{"thread": id, "at": point}`` (the CLI forks that
    thread as the session first runs); cleared once a thread is bound."""
    budget: dict[str, JsonValue] | None = None
    """What the session may spend in all: ``{"max_cost_usd"?, "max_tokens"?}`` (None: no
    budget of its own; its key's may still apply)."""
    title: str | None = None
    """What lists and searches show: ``metadata.title``, else the start of the first prompt
    (None until one is sent); see ``session_title``."""


TITLE_MAX_CHARS = 120
"""A session's title is cut to this many characters (an ellipsis marks the cut)."""


def session_title(text: object) -> str | None:
    """``text`` (a ``metadata.title`` or a first prompt) as a one-line title: whitespace
    collapsed, cut at ``TITLE_MAX_CHARS``; None when it is not a string or is blank."""
    if not isinstance(text, str):
        return None
    line = " ".join(text.split())
    if not line:
        return None
    return line if len(line) <= TITLE_MAX_CHARS else line[: TITLE_MAX_CHARS - 1] + "…"


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnRecord:
    """One turn; ``number`` counts a session's turns 1, 2, 3, …"""

    id: str
    session_id: str
    number: int
    prompt: str
    status: TurnStatus
    provider: str
    created_at: datetime
    attempts: int = 0
    retry_policy: dict[str, JsonValue] | None = None
    usage: dict[str, JsonValue] | None = None
    error: dict[str, JsonValue] | None = None
    final_text: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    resume_at: datetime | None = None
    """A turn waiting for a usage limit to reset continues then (it survives a restart)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageTotals:
    """Usage summed over ended turns, as their rows keep it; ``cost_usd`` is None when none of
    them reported a cost."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cost_usd: float | None = None
    turns: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageGroup:
    """The usage of one key's turns on one provider and model (None: the CLI's default)."""

    key: str | None
    provider: str
    model: str | None
    totals: UsageTotals


@dataclass(frozen=True, kw_only=True, slots=True)
class ApprovalRecord:
    """A request awaiting (or past) a client's answer; pending ones survive a restart.

    ``kind`` ``tool``: a tool call to allow or deny. ``kind`` ``question``: the agent's
    questions (``input`` is ``{"questions": [Question, …]}``, ``options`` empty), answered
    with ``answers`` (one ``QuestionAnswer`` per question) and status ``answered``.
    """

    id: str
    session_id: str
    turn_id: str | None
    provider_request_id: str
    tool: str
    input: dict[str, JsonValue]
    options: list[JsonValue]
    status: ApprovalStatus
    expires_at: datetime
    created_at: datetime
    title: str | None = None
    tool_id: str | None = None
    decision: ApprovalDecision | None = None
    message: str | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    updated_input: dict[str, JsonValue] | None = None
    """The input the tool ran with when the client edited it; ``input`` is what was asked."""
    updated_by: str | None = None
    """The key (its name) that edited the input (or answered a question)."""
    kind: RequestKind = "tool"
    answers: list[JsonValue] | None = None
    """A question's answers, one ``QuestionAnswer`` per question."""


IdempotencyState = Literal["in_flight", "done"]


@dataclass(frozen=True, kw_only=True, slots=True)
class IdempotencyRecord:
    """A request sent with an ``Idempotency-Key``: by which key, what it asked (its
    fingerprint), and once answered the answer a retry gets again until ``expires_at``.

    ``in_flight`` while ``holder`` (a replica) answers it; ``done`` with the response."""

    owner: str
    """The key (its name) that sent it: keys are scoped per API key."""
    key: str
    request: str
    """What it asked, for people: ``createTurn ses_…``."""
    fingerprint: str
    """SHA-256 of the request's canonical JSON (app/runtime/idempotency.py)."""
    state: IdempotencyState
    holder: str
    created_at: datetime
    expires_at: datetime
    status: int | None = None
    headers: dict[str, JsonValue] | None = None
    body: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class BindingRecord:
    """Session → CLI thread for one provider; ``updated_at`` is its last use (retention)."""

    session_id: str
    provider: str
    thread_id: str
    created_at: datetime
    updated_at: datetime


@dataclass(kw_only=True, slots=True, eq=False)
class EventRecord:
    """One event to store: the envelope fields and the payload as the JSON text that is
    stored (encoded once); ``data`` decodes it, for the few readers that look inside.
    Treated as immutable (not frozen: one is made per event, and frozen ones cost more)."""

    seq: int
    session_id: str
    turn_id: str | None
    attempt: int | None
    provider: str | None
    at: datetime
    at_text: str
    """``at`` as stored (``stored_time``), formatted once."""
    type: EventType
    data_json: str
    _data: dict[str, Any] | None = field(default=None)

    @property
    def data(self) -> dict[str, Any]:
        if self._data is None:
            self._data = json.loads(self.data_json)
        return self._data


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredEvent:
    """One event read back: its seq, type and turn, and its wire form (``Event``)."""

    seq: int
    type: EventType
    turn_id: str | None
    json: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RevertRecord:
    """What a revert did: the workspace back at the start of turn ``to_turn``, and the files
    it changed to get there (``ChangedFile`` values)."""

    session_id: str
    to_turn: str
    turn_number: int
    files: list[dict[str, Any]]
    additions: int = 0
    deletions: int = 0


def json_dict(value: Any) -> dict[str, JsonValue]:
    """A pydantic model or mapping as a JSON-ready dict for a JSON column."""
    if hasattr(value, "model_dump"):
        dumped: dict[str, JsonValue] = value.model_dump(mode="json")
        return dumped
    return dict(value)

"""The gateway's error tree; the API maps it to ``application/problem+json`` in one place.

GatewayError                 status, type, title, detail, extra fields
├── NotFound                 404  session, turn, approval or question does not exist (or is not
│                                 yours)
├── Conflict                 409  the session's state forbids the request
│   ├── TurnInProgress            a turn is already running (carries its id)
│   ├── NoTurnRunning             nothing to interrupt
│   ├── SessionClosed             the session was deleted or ended
│   ├── BranchExists              the branch a new session's worktree asks for exists
│   ├── ForkInProgress            the session is being forked (a turn or another fork waits)
│   ├── ApprovalNotPending        the approval was already resolved
│   ├── QuestionNotPending        the question was already answered or ended
│   ├── RevertInProgress          the session's workspace is being reverted
│   ├── ConfigureInProgress       the session's model, mode or provider is being changed
│   ├── ProviderFixed             a session that has run a turn keeps its provider
│   ├── TurnNotForkable           a fork asked at a turn that did not complete
│   ├── SnapshotUnavailable       the workspace state asked for was not recorded
│   └── IdempotencyKeyInUse       a request with the same key is still being answered
├── InvalidRequest           422  a field is well-formed but unacceptable
│   ├── WorkspaceRejected         the workspace is outside the roots or missing
│   ├── RepositoryRejected        the repository, ref or branch of a worktree is unusable
│   ├── WorkspaceTooLarge         the workspace is over the snapshot cap
│   ├── CapabilitiesUnmet         no candidate provider has what ``requires`` names (selector)
│   └── IdempotencyKeyReused      the key was used for another request (another body)
├── InternalError            500  an unexpected failure, answered with its error id only
├── Unauthorized             401  missing or wrong token
├── BudgetExceeded           402  the session's budget is spent
├── Forbidden                403  host or origin not allowed
├── Gone                     410  the cursor is older than the events the gateway keeps
├── PayloadTooLarge          413  body over the limit
├── TooManyRequests          429  a rate or subscriber limit was reached (Retry-After)
│   ├── KeyShareExceeded          the key holds its share of a global cap
│   └── KeyBudgetExceeded         the key's budget for this day or month is spent
└── Unavailable              503  the gateway cannot serve the request now (Retry-After)
    ├── ProviderUnavailable       the provider cannot serve the request now
    │   └── NoProviderAvailable   no candidate is available (selector)
    ├── AtCapacity                every live-process or subscriber slot is taken
    └── StorageUnavailable        the database cannot be written (disk full, I/O error)
"""

from __future__ import annotations

import logging
import secrets

from pydantic import JsonValue

PROBLEM_BASE = "urn:agent-gateway:problem:"


class GatewayError(Exception):
    """Root of every error the API reports; ``type`` is a stable slug clients can match."""

    status: int = 500
    type: str = "internal"
    title: str = "Internal error"

    def __init__(
        self, detail: str, *, retry_after_s: float | None = None, **fields: JsonValue
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.fields = fields
        self.retry_after_s = retry_after_s
        """Sent as ``Retry-After`` (whole seconds, at least 1) when set."""


class InternalError(GatewayError):
    """An unexpected failure. The client gets its ``error_id`` and nothing else about it:
    the exception's text may hold anything (paths, a peer's answer, a secret), so it stays
    in the log, under that id, with its traceback."""

    def __init__(self, error_id: str) -> None:
        super().__init__(
            f"internal error, id {error_id}; the gateway's log has the details under this id",
            error_id=error_id,
        )
        self.error_id = error_id


def internal_error(logger: logging.Logger, what: str, exc: BaseException) -> InternalError:
    """Log ``exc`` with its traceback under a new error id; return the error the client
    gets, which holds only that id."""
    error_id = secrets.token_hex(8)
    logger.error(
        "%s failed; error id %s", what, error_id, exc_info=exc, extra={"error_id": error_id}
    )
    return InternalError(error_id)


class NotFound(GatewayError):
    status = 404
    type = "not_found"
    title = "Not found"


class Conflict(GatewayError):
    status = 409
    type = "conflict"
    title = "Conflict"


class TurnInProgress(Conflict):
    type = "turn_in_progress"
    title = "A turn is already running"


class NoTurnRunning(Conflict):
    type = "no_turn_running"
    title = "No turn is running"


class SessionClosed(Conflict):
    type = "session_closed"
    title = "Session is closed"


class BranchExists(Conflict):
    type = "branch_exists"
    title = "Branch exists"


class ForkInProgress(Conflict):
    type = "fork_in_progress"
    title = "The session is being forked"


class ApprovalNotPending(Conflict):
    type = "approval_not_pending"
    title = "Approval is no longer pending"


class QuestionNotPending(Conflict):
    type = "question_not_pending"
    title = "Question is no longer pending"


class RevertInProgress(Conflict):
    type = "revert_in_progress"
    title = "A revert is running"


class ConfigureInProgress(Conflict):
    type = "configure_in_progress"
    title = "The session is being configured"


class ProviderFixed(Conflict):
    """A session's provider changes only before its first turn: its conversation lives in
    that provider's thread from then on."""

    type = "provider_fixed"
    title = "The session's provider is fixed"


class SnapshotUnavailable(Conflict):
    """The workspace state asked for was not recorded (snapshots off, the workspace over
    their cap then, or the turn has not ended)."""

    type = "snapshot_unavailable"
    title = "Workspace state not recorded"


class InvalidRequest(GatewayError):
    status = 422
    type = "invalid_request"
    title = "Invalid request"


class WorkspaceRejected(InvalidRequest):
    type = "workspace_rejected"
    title = "Workspace rejected"


class RepositoryRejected(InvalidRequest):
    """The repository, ref or branch a worktree session names cannot be used."""

    type = "repository_rejected"
    title = "Repository rejected"


class WorkspaceTooLarge(InvalidRequest):
    """The workspace holds more than the snapshot store records (``snapshots.max_files``,
    ``snapshots.max_bytes``)."""

    type = "workspace_too_large"
    title = "Workspace too large"


class TurnNotForkable(Conflict):
    """A fork asked at a turn that did not complete (or of a session with none)."""

    type = "turn_not_forkable"
    title = "Turn cannot be forked"


class IdempotencyKeyInUse(Conflict):
    """A request with the same ``Idempotency-Key`` is still being answered (Retry-After)."""

    type = "idempotency_key_in_use"
    title = "Idempotency key in use"


class IdempotencyKeyReused(InvalidRequest):
    """The ``Idempotency-Key`` was used before for another request (another route or body)."""

    type = "idempotency_key_reused"
    title = "Idempotency key reused"


class BudgetExceeded(GatewayError):
    """The session's budget (``max_cost_usd`` or ``max_tokens``) is spent: no turn starts."""

    status = 402
    type = "budget_exceeded"
    title = "Budget exceeded"


class Unauthorized(GatewayError):
    status = 401
    type = "unauthorized"
    title = "Unauthorized"


class Forbidden(GatewayError):
    status = 403
    type = "forbidden"
    title = "Forbidden"


class Gone(GatewayError):
    status = 410
    type = "cursor_expired"
    title = "Events no longer kept"


class PayloadTooLarge(GatewayError):
    status = 413
    type = "payload_too_large"
    title = "Payload too large"


class TooManyRequests(GatewayError):
    status = 429
    type = "rate_limited"
    title = "Too many requests"


class KeyShareExceeded(TooManyRequests):
    """The key already holds its share of a cap every key shares; other keys still get theirs."""

    type = "key_share_exceeded"
    title = "Key share exceeded"


class KeyBudgetExceeded(TooManyRequests):
    """The key's budget for this calendar day or month is spent; Retry-After says when it
    starts over."""

    type = "key_budget_exceeded"
    title = "Key budget exceeded"


class Unavailable(GatewayError):
    status = 503
    type = "unavailable"
    title = "Service unavailable"


class ProviderUnavailable(Unavailable):
    type = "provider_unavailable"
    title = "Provider unavailable"


class AtCapacity(Unavailable):
    type = "at_capacity"
    title = "At capacity"


class StorageUnavailable(Unavailable):
    type = "storage_unavailable"
    title = "Storage unavailable"


class ClusterUnavailable(Unavailable):
    """Redis, which the replicas coordinate through, cannot be reached now."""

    type = "cluster_unavailable"
    title = "Cluster unavailable"


class SessionFenced(ClusterUnavailable):
    """A write for a session that another replica has claimed since this one did (its events
    under an older fencing token, or anything else its owner writes): the writer lost the
    session and must stop. A client that met it retries and reaches the new owner."""

    def __init__(self, session_ids: list[str]) -> None:
        super().__init__(
            "another replica has taken over " + ", ".join(session_ids) + "; this one may no "
            "longer write for it: retry",
            retry_after_s=1,
        )
        self.session_ids = session_ids


def problem(
    *, status: int, type_: str, title: str, detail: str, **fields: JsonValue
) -> dict[str, JsonValue]:
    """An RFC 9457 problem document."""
    body: dict[str, JsonValue] = {
        "type": PROBLEM_BASE + type_,
        "title": title,
        "status": status,
        "detail": detail,
    }
    body.update(fields)
    return body


def problem_for(error: GatewayError) -> dict[str, JsonValue]:
    body = problem(status=error.status, type_=error.type, title=error.title, detail=error.detail)
    for key, value in error.fields.items():
        body.setdefault(key, value)  # the standard members are never overridden
    return body

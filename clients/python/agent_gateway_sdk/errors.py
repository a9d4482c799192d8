"""The SDK's exceptions: one root, a problem+json answer as data, transport trouble apart.

AgentGatewayError            the root: anything this SDK raises on purpose
├── ApiError                 the gateway answered with an error (``application/problem+json``):
│   │                        status, type (``urn:agent-gateway:problem:<code>``), code, title,
│   │                        detail, retry_after (seconds), errors (422), problem (the whole body)
│   ├── AuthenticationError  401  missing or wrong key
│   ├── PermissionDenied     403  host, origin or an admin-only route
│   ├── NotFoundError        404  no such session, turn, approval or question (or not yours)
│   ├── ConflictError        409  the session's state forbids it (turn_in_progress carries turn_id)
│   ├── GoneError            410  the cursor is older than the events kept (``first_seq``)
│   ├── PayloadTooLarge      413
│   ├── UnprocessableEntity  422  a field was refused; ``errors`` names each one
│   ├── RateLimited          429  see ``retry_after``
│   └── ServerError          5xx
│       └── ServiceUnavailable  503  see ``retry_after``
├── ConnectionFailed         the gateway could not be reached, or a stream could not be resumed
│                            within its reconnect timeout
├── UnexpectedResponse       an answer or an event this SDK cannot read (not the API it speaks)
└── EventsSkipped            a stream's cursor was older than the events the gateway keeps
                             (``resync_required``) and no ``on_control`` handler was given
"""

from __future__ import annotations

import json
from typing import Any

PROBLEM_PREFIX = "urn:agent-gateway:problem:"


class AgentGatewayError(Exception):
    """Root of every exception the SDK raises."""


class ApiError(AgentGatewayError):
    """An error answer of the gateway, with its problem document's members as attributes."""

    def __init__(
        self,
        *,
        status: int,
        problem: dict[str, Any],
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.problem = problem
        self.type: str = str(problem.get("type") or "about:blank")
        self.title: str = str(problem.get("title") or "")
        self.detail: str = str(problem.get("detail") or "")
        self.retry_after = retry_after
        """The answer's ``Retry-After`` in seconds, when it had one."""
        errors = problem.get("errors")
        self.errors: list[dict[str, Any]] = errors if isinstance(errors, list) else []
        """For a 422: ``[{location, message}]``, one per refused field."""
        super().__init__(f"{status} {self.code}: {self.detail or self.title}")

    @property
    def code(self) -> str:
        """The stable slug of ``type`` (``turn_in_progress``, ``not_found``, …)."""
        return self.type.removeprefix(PROBLEM_PREFIX)

    def __getitem__(self, member: str) -> Any:
        """Any member of the problem document (``error["turn_id"]``, ``error["first_seq"]``)."""
        return self.problem[member]

    def get(self, member: str, default: Any = None) -> Any:
        return self.problem.get(member, default)


class AuthenticationError(ApiError):
    """401: the key is missing or wrong."""


class PermissionDenied(ApiError):
    """403: the host or origin is not allowed, or the route needs an admin key."""


class NotFoundError(ApiError):
    """404: no such resource, or it belongs to another key."""


class ConflictError(ApiError):
    """409: the session's state forbids the request (a turn running, a closed session, …)."""


class GoneError(ApiError):
    """410: the cursor is older than the oldest event kept (``first_seq``)."""


class PayloadTooLarge(ApiError):
    """413: the body is over the gateway's limit."""


class UnprocessableEntity(ApiError):
    """422: a field was refused; ``errors`` says which and why."""


class RateLimited(ApiError):
    """429: a rate or subscriber limit was reached; wait ``retry_after`` seconds."""


class ServerError(ApiError):
    """5xx: the gateway failed (an internal error carries its ``error_id``)."""


class ServiceUnavailable(ServerError):
    """503: the gateway cannot serve this now (no provider, at capacity, storage)."""


class ConnectionFailed(AgentGatewayError):
    """The gateway could not be reached (or a stream not resumed within its timeout)."""


class UnexpectedResponse(AgentGatewayError):
    """An answer or an event that does not have the shape of the API this SDK speaks (a
    gateway of another API version, or something else at the URL)."""


class EventsSkipped(AgentGatewayError):
    """Events after the stream's cursor are no longer kept: the stream would skip from
    ``after`` to ``first_seq``. Reload what you derive from events (the session, its turns),
    then stream again from ``first_seq - 1``; or pass ``on_control`` to go on past gaps."""

    def __init__(self, *, first_seq: int, after: int) -> None:
        self.first_seq = first_seq
        self.after = after
        super().__init__(
            f"events {after + 1}..{first_seq - 1} are no longer kept; the oldest is {first_seq}"
        )


_BY_STATUS: dict[int, type[ApiError]] = {
    401: AuthenticationError,
    403: PermissionDenied,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    413: PayloadTooLarge,
    422: UnprocessableEntity,
    429: RateLimited,
    503: ServiceUnavailable,
}


def error_for(status: int, body: bytes, headers: dict[str, str]) -> ApiError:
    """The exception for an error answer: its problem document, or one made from its text."""
    problem: dict[str, Any]
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        problem = parsed
    else:
        text = body.decode("utf-8", errors="replace").strip()
        problem = {"title": f"HTTP {status}", "status": status, "detail": text[:2000]}
    kind = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    return kind(status=status, problem=problem, retry_after=retry_after(headers))


def retry_after(headers: dict[str, str]) -> float | None:
    """``Retry-After`` in seconds (the gateway sends whole seconds; a date is not used)."""
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None

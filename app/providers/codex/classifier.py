"""Codex failures in the shared taxonomy: pure functions over what app-server reported.

The only place where Codex's ``codexErrorInfo`` values and error texts are matched
(reference §2.4); everything downstream decides from the ``FailureKind``. Codex has already
retried the model request itself (``stream_max_retries`` times ``request_max_retries``) when a
turn fails, so "retryable" means: another turn in the same thread may succeed later.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from app.events import RETRYABLE_KINDS, FailureKind, RetryScheduled, TurnError
from app.providers import faults
from app.providers.exits import how_it_ended
from app.providers.raw import as_dict, as_number, as_unix_time

__all__ = [
    "PROVIDER",
    "RETRYABLE_KINDS",
    "error_for_resume",
    "error_for_rpc",
    "error_for_turn",
    "interrupted_error",
    "kind_for_error_info",
    "kind_for_status",
    "retry_notice",
    "server_lost_error",
    "usage_reset",
]

PROVIDER = "codex"


_INFO_KINDS: dict[str, FailureKind] = {
    "contextWindowExceeded": "invalid_request",
    "sessionBudgetExceeded": "usage_limit",
    "usageLimitExceeded": "usage_limit",
    "rateLimitExceeded": "rate_limited",
    "flexUnavailable": "overloaded",
    "serverOverloaded": "overloaded",
    "modelNotFound": "invalid_request",
    # The reference counts the policy errors as final: another attempt meets the same policy,
    # and handing the refused request to another agent would route around the refusal.
    "policyCapacityUnavailable": "agent_error",
    "cyberPolicy": "agent_error",
    "bioPolicy": "agent_error",  # new in 0.171.0: a Responses error code `bio_policy`
    "misalignmentPolicyViolation": "agent_error",
    "inferenceHookDenied": "agent_error",
    "tooManyDenials": "agent_error",
    "internalServerError": "server_error",
    "unauthorized": "auth",
    "badRequest": "invalid_request",
    "threadRollbackFailed": "agent_error",
    "sandboxError": "agent_error",
    "activeTurnNotSteerable": "invalid_request",
}

# The `{name: {httpStatusCode}}` variants: transport failures, classified by status first.
_HTTP_INFOS = frozenset(
    {
        "httpConnectionFailed",
        "responseStreamConnectionFailed",
        "responseStreamDisconnected",
        "responseTooManyFailedAttempts",
    }
)

# Texts seen with 0.169.0 (reference §2.4, obs): a stream cut that outlived its retries is
# `codexErrorInfo: "other"` with "stream disconnected before completion…" (an idle stream
# ends the same way); an HTTP 500 retry is `responseStreamDisconnected` without a status and
# "We're currently experiencing high demand…" (with a typographic apostrophe); a 401 from a
# custom provider reads "unexpected status 401 Unauthorized: …".
_STATUS_TEXT = re.compile(r"unexpected status (\d{3})\b", re.IGNORECASE)
_SERVER_TEXT = re.compile(r"high demand|internal server error", re.IGNORECASE)
_NETWORK_TEXT = re.compile(
    r"stream disconnected|stream closed|connection|timed? ?out|error sending request|dns",
    re.IGNORECASE,
)
_RECONNECTING = re.compile(r"Reconnecting\.\.\.\s*(\d+)\s*/\s*(\d+)")


_STATUS_DIALECT: dict[int, FailureKind] = {
    499: "network",  # the request was cut before the API answered
    503: "overloaded",  # the Responses API's "high demand" answer
}


def kind_for_status(status: int | None) -> FailureKind:
    """Classify an HTTP status of the model API in the shared table (with Codex's dialect);
    ``None`` (no response at all) is network, another 4xx an invalid request."""
    if status is None:
        return "network"
    kind = faults.kind_for_status(status, dialect=_STATUS_DIALECT)
    if kind is not None:
        return kind
    return "invalid_request" if 400 <= status <= 499 else "unknown"


def kind_for_error_info(info: object, message: str = "") -> FailureKind:
    """Classify a ``codexErrorInfo`` (a string or a one-key object), else the message text."""
    if isinstance(info, str) and info in _INFO_KINDS:
        return _INFO_KINDS[info]
    if isinstance(info, dict) and len(info) == 1:
        (name, detail), *_ = info.items()
        if name in _HTTP_INFOS:
            status = detail.get("httpStatusCode") if isinstance(detail, dict) else None
            if isinstance(status, int) and not isinstance(status, bool):
                return kind_for_status(status)
            return _kind_from_text(message) or "network"
        if name in _INFO_KINDS:
            return _INFO_KINDS[name]
    return _kind_from_text(message) or "unknown"


def _kind_from_text(text: str) -> FailureKind | None:
    match = _STATUS_TEXT.search(text)
    if match:
        return kind_for_status(int(match.group(1)))
    if _SERVER_TEXT.search(text):
        return "server_error"
    if _NETWORK_TEXT.search(text):
        return "network"
    return None


def error_for_turn(error: object) -> TurnError:
    """Explain the ``error`` of a failed ``turn/completed`` (or a final ``error`` notice)."""
    raw: dict[str, Any] = error if isinstance(error, dict) else {}
    message = _text(raw.get("message"))
    details = raw.get("additionalDetails")
    if isinstance(details, str) and details and details not in message:
        message = f"{message} ({details})" if message else details
    kind = kind_for_error_info(raw.get("codexErrorInfo"), message)
    return TurnError(
        kind=kind,
        message=message or "Codex ended the turn with an error.",
        retryable=kind in RETRYABLE_KINDS,
        provider=PROVIDER,
    )


def usage_reset(rate_limits: object) -> datetime | None:
    """When the account's spent usage window resets, from ``account/rateLimits/updated``:
    the latest ``resetsAt`` (Unix seconds) of the windows at 100 %; None when none is spent.

    The turn's own error only says "try again at 2:30 PM" in the server's local time."""
    limits = as_dict(rate_limits)
    resets: list[datetime] = []
    for window in (as_dict(limits.get("primary")), as_dict(limits.get("secondary"))):
        used = as_number(window.get("usedPercent"))
        when = as_unix_time(window.get("resetsAt"))
        if used is not None and used >= 100 and when is not None:
            resets.append(when)
    return max(resets, default=None)


def retry_notice(params: dict[str, Any]) -> RetryScheduled:
    """Turn an ``error`` notification with ``willRetry: true`` into ``retry.scheduled``.

    The attempt and budget come from the message, ``Reconnecting... n/m`` (obs); the reason
    is in ``additionalDetails``. Codex does not say how long it waits.
    """
    error = params.get("error")
    raw: dict[str, Any] = error if isinstance(error, dict) else {}
    message = _text(raw.get("message"))
    details = raw.get("additionalDetails")
    match = _RECONNECTING.search(message)
    reason = details if isinstance(details, str) and details else message
    return RetryScheduled(
        source="cli",
        attempt=int(match.group(1)) if match else 1,
        max_attempts=int(match.group(2)) if match else None,
        delay_s=None,
        kind=kind_for_error_info(raw.get("codexErrorInfo"), reason),
        message=f"Codex retries the model request: {reason}" if reason else None,
    )


def error_for_rpc(method: str, code: int, message: str) -> TurnError:
    """Explain a JSON-RPC error answer to one of the gateway's requests."""
    kind: FailureKind
    if code == -32001:  # "Server overloaded; retry later." (reference §2.3)
        kind = "overloaded"
    elif code in (-32600, -32602):
        kind = "invalid_request"
    else:
        kind = "unknown"
    return TurnError(
        kind=kind,
        message=f"Codex refused {method}: {message}",
        retryable=kind in RETRYABLE_KINDS,
        provider=PROVIDER,
    )


# `thread/resume` of a thread whose session file is gone (0.169.0, obs): JSON-RPC error
# -32600 "no rollout found for thread id <id>".
_THREAD_GONE_TEXT = re.compile(r"no rollout found|thread not found|unknown thread", re.IGNORECASE)


def error_for_resume(thread_id: str, code: int, message: str) -> TurnError:
    """Explain a refused ``thread/resume``: ``context_lost`` when Codex no longer has the thread."""
    if _THREAD_GONE_TEXT.search(message):
        return TurnError(
            kind="context_lost",
            message=f"Codex could not resume thread {thread_id}; the next turn starts a new "
            f"conversation. {message}",
            provider=PROVIDER,
        )
    return error_for_rpc("thread/resume", code, message)


def server_lost_error(reason: str, returncode: int | None, stderr_tail: str) -> TurnError:
    """Explain a turn cut short because the shared app-server died or stopped answering.

    The thread lives on in Codex's session files, so another attempt resumes it on a fresh
    server: retryable.
    """
    how = "stopped" if returncode is None else how_it_ended(returncode)
    tail = stderr_tail.strip()
    return TurnError(
        kind="cli_crashed",
        message=f"The Codex app-server {how} during the turn ({reason}).",
        retryable=True,
        provider=PROVIDER,
        exit_code=returncode,
        stderr_tail=tail[-4000:] or None,
    )


def interrupted_error(detail: str = "interrupted by the client") -> TurnError:
    return TurnError(kind="interrupted", message=f"The turn was {detail}.", provider=PROVIDER)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""

"""OpenCode failures in the shared taxonomy: pure functions over what the server reported.

The only place where OpenCode's error names and texts are matched; everything downstream
decides from the ``FailureKind``. Error objects are the ``session.error`` /
``AssistantMessage.error`` union of 1.18.33: ``{"name": …, "data": {"message", …}}``.
"""

from __future__ import annotations

from typing import Any

from app.events import RETRYABLE_KINDS, FailureKind, TurnError
from app.providers.exits import how_it_ended
from app.providers.faults import kind_for_status, kind_for_text
from app.providers.raw import as_dict, as_opt_int, as_str

__all__ = [
    "PROVIDER",
    "RETRYABLE_KINDS",
    "error_for_exit",
    "error_for_session_error",
    "interrupted_error",
    "kind_for_retry",
    "kind_for_status",
    "kind_for_text",
]

PROVIDER = "opencode"


_NAME_KINDS: dict[str, FailureKind] = {
    "ProviderAuthError": "auth",
    "ContextOverflowError": "invalid_request",
    "MessageAbortedError": "interrupted",
    "MessageOutputLengthError": "agent_error",
    "StructuredOutputError": "agent_error",
    # The model's output was filtered: the same request would be filtered again.
    "ContentFilterError": "agent_error",
}


def kind_for_retry(message: str) -> FailureKind:
    """Classify a ``session.status {type: "retry"}`` notice, which carries only a message.

    OpenCode retries only what it considers transient, so a message that names nothing is
    most likely a server-side failure.
    """
    kind = kind_for_text(message)
    return "server_error" if kind == "unknown" else kind


def interrupted_error(detail: str | None = None) -> TurnError:
    """Return the error attached to a turn the user (or the server) aborted."""
    suffix = f" ({detail})" if detail else ""
    return TurnError(
        kind="interrupted", message=f"The turn was interrupted{suffix}.", provider=PROVIDER
    )


def error_for_session_error(error: dict[str, Any]) -> TurnError:
    """Explain a ``session.error`` (or an assistant message's ``error``) object."""
    name = as_str(error.get("name"))
    data = as_dict(error.get("data"))
    message = as_str(data.get("message"))
    text = message or name or "OpenCode reported an error without a message."
    kind: FailureKind | None = _NAME_KINDS.get(name or "")
    if kind == "interrupted":
        return interrupted_error(message)
    if kind is None and name == "APIError":
        status = as_opt_int(data.get("statusCode"))
        if status is not None:
            kind = kind_for_status(status)
        if kind is None:
            kind = kind_for_text(text)
            # OpenCode's own judgement, from the provider SDK, when the text says nothing.
            if kind == "unknown" and data.get("isRetryable") is True:
                kind = "server_error"
    if kind is None:
        kind = kind_for_text(text)
    return TurnError(kind=kind, message=text, retryable=kind in RETRYABLE_KINDS, provider=PROVIDER)


def error_for_exit(returncode: int | None, stderr_tail: str) -> TurnError:
    """Explain the shared server ending while a turn was running.

    ``returncode`` follows ``asyncio.subprocess``: negative for a signal, ``None`` when
    unknown. The thread lives on in OpenCode's data directory, so the turn may continue on a
    restarted server: retryable.
    """
    how = "stopped answering" if returncode is None else how_it_ended(returncode)
    tail = stderr_tail.strip()
    return TurnError(
        kind="cli_crashed",
        message=f"opencode serve {how} during the turn.",
        retryable=True,
        provider=PROVIDER,
        exit_code=returncode,
        stderr_tail=tail[-4000:] or None,
    )

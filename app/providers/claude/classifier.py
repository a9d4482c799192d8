"""Claude Code failures in the shared taxonomy: pure functions over what the CLI printed.

The only place where Claude's error categories and texts are matched; everything downstream
decides from the ``FailureKind``.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from app.events import RETRYABLE_KINDS, FailureKind, RetryScheduled, TurnError
from app.providers.exits import how_it_ended
from app.providers.faults import kind_for_status
from app.providers.raw import as_int, as_number, as_opt_int, as_unix_time

__all__ = [
    "PROVIDER",
    "RETRYABLE_KINDS",
    "error_for_exit",
    "error_for_result",
    "interrupted_error",
    "kind_for_api_error",
    "kind_for_api_retry",
    "retry_notice",
]

PROVIDER = "claude_code"


# Categories as the CLI names them: `SDKAssistantMessageError` (assistant.error,
# api_retry.error) and the Anthropic API's `error.type` (result.api_error_type).
_CATEGORY_KINDS: dict[str, FailureKind] = {
    "rate_limit": "rate_limited",
    "rate_limit_error": "rate_limited",
    "overloaded": "overloaded",
    "overloaded_error": "overloaded",
    "server_error": "server_error",
    "api_error": "server_error",
    "timeout_error": "network",
    "authentication_failed": "auth",
    "authentication_error": "auth",
    "permission_error": "auth",
    "oauth_org_not_allowed": "auth",
    "account_on_hold": "auth",
    "verification_required": "auth",
    "cloud_credential_error": "auth",
    # Not a credential problem: the CLI itself words it "usage limit reached — check plan"
    # (2.1.330), and new credentials would not help, only a plan change or time.
    "billing_error": "usage_limit",
    "invalid_request": "invalid_request",
    "invalid_request_error": "invalid_request",
    "model_not_found": "invalid_request",
    "not_found_error": "invalid_request",
    "request_too_large": "invalid_request",
    "max_output_tokens": "agent_error",
}

_NETWORK_TEXT = re.compile(
    r"connection|network|econn|enotfound|eai_again|socket|fetch failed|timed? ?out|"
    r"unable to connect|dns",
    re.IGNORECASE,
)
_USAGE_LIMIT_TEXT = re.compile(r"usage limit|out of (extra )?usage|credit balance", re.IGNORECASE)
_PROMPT_TOO_LONG_TEXT = re.compile(r"prompt is too long", re.IGNORECASE)
# "API Error: 529 Overloaded. …" — the result text when api_error_status is missing.
_API_STATUS_TEXT = re.compile(r"API Error: (\d{3})\b")

_TERMINAL_REASON_KINDS: dict[str, FailureKind] = {
    "aborted_streaming": "interrupted",
    "aborted_tools": "interrupted",
    "prompt_too_long": "invalid_request",
    # The context window's blocking limit: the same condition as prompt_too_long, reached
    # before the request was even sent.
    "blocking_limit": "invalid_request",
    "image_error": "invalid_request",
    "max_turns": "agent_error",
    "budget_exhausted": "agent_error",
    "structured_output_retry_exhausted": "agent_error",
    "malformed_tool_use_exhausted": "agent_error",
    "model_error": "agent_error",
    "stop_hook_prevented": "agent_error",
    "hook_stopped": "agent_error",
}

_SUBTYPE_KINDS: dict[str, FailureKind] = {
    "error_max_turns": "agent_error",
    "error_max_budget_usd": "agent_error",
    "error_max_structured_output_retries": "agent_error",
}


def kind_for_api_error(status: int | None, error: str | None) -> FailureKind:
    """Classify an Anthropic API failure by HTTP status first, then by category or text.

    The status is read in the shared table (``faults.kind_for_status``). It wins because the
    CLI's category is coarse: 2.1.330 files every status ≥ 408 that is not 429/529 under
    ``server_error`` (e.g. a 413), and labels an exhausted 529 ``server_error`` on the
    synthetic assistant line.
    """
    if status is not None:
        by_status = kind_for_status(status)
        if by_status is not None:
            return by_status
    if error:
        kind = _CATEGORY_KINDS.get(error.strip().lower())
        if kind is not None:
            return kind
        if _USAGE_LIMIT_TEXT.search(error):
            return "usage_limit"
        if status is None and _NETWORK_TEXT.search(error):
            return "network"
    return "unknown"


def kind_for_api_retry(status: int | None, error: str | None) -> FailureKind:
    """Classify a ``system/api_retry`` notice.

    The CLI reports connection failures there as ``error_status: null`` with the category
    ``unknown`` (2.1.330), so an unclassified retry without a status is a network failure.
    """
    kind = kind_for_api_error(status, error)
    if kind == "unknown" and status is None:
        return "network"
    return kind


def interrupted_error(terminal_reason: str | None = None) -> TurnError:
    """Return the error attached to a turn the user interrupted."""
    detail = f" ({terminal_reason})" if terminal_reason else ""
    return TurnError(
        kind="interrupted", message=f"The turn was interrupted{detail}.", provider=PROVIDER
    )


def error_for_result(result: dict[str, Any]) -> TurnError:
    """Explain a ``result`` line with ``is_error: true``.

    Decides from ``terminal_reason``, ``api_error_status`` / ``api_error_type`` and the
    subtype; the text (``errors[]`` or ``result``) is the message and only a last resort for
    the kind.
    """
    subtype = _str(result.get("subtype"))
    terminal_reason = _str(result.get("terminal_reason"))
    status = result.get("api_error_status")
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    api_error_type = _str(result.get("api_error_type"))
    message = _message(result, subtype, terminal_reason)

    kind: FailureKind
    if terminal_reason == "api_error" or status is not None or api_error_type is not None:
        kind = kind_for_api_error(status, api_error_type)
        if kind == "unknown":
            kind = _kind_from_text(message)
    elif terminal_reason in _TERMINAL_REASON_KINDS:
        kind = _TERMINAL_REASON_KINDS[terminal_reason]
    elif subtype in _SUBTYPE_KINDS:
        kind = _SUBTYPE_KINDS[subtype]
    else:
        kind = _kind_from_text(message)
    if result.get("api_error") == "usage_limit_reached":
        # A subscription's usage limit (2.1.330 with a claude.ai login, obs): a 429 whose
        # unified rate-limit headers said "rejected"; another attempt waits for the reset.
        kind = "usage_limit"
    if kind == "interrupted":
        return interrupted_error(terminal_reason)
    return TurnError(
        kind=kind,
        message=message,
        retryable=kind in RETRYABLE_KINDS,
        provider=PROVIDER,
        resets_at=usage_reset(result) if kind == "usage_limit" else None,
    )


def usage_reset(raw: dict[str, Any]) -> datetime | None:
    """When a rejected usage limit resets: ``rate_limit_info.resetsAt`` (Unix seconds) of a
    ``rate_limit_event``, or of a result's ``api_error_params``."""
    params = raw.get("api_error_params")
    info = raw.get("rate_limit_info")
    if isinstance(params, dict):
        info = params.get("rate_limit_info")
    if not isinstance(info, dict) or info.get("status") != "rejected":
        return None
    return as_unix_time(info.get("resetsAt"))


def error_for_exit(returncode: int | None, stderr_tail: str) -> TurnError:
    """Explain a CLI process that ended (or was lost) before printing the turn's ``result``.

    ``returncode`` follows ``asyncio.subprocess``: negative for a signal, ``None`` when
    unknown. The turn may continue in the same thread on a fresh process, hence retryable.
    """
    if returncode is None:
        how = "ended without a result (exit status unknown)"
    else:
        how = how_it_ended(returncode, suffix=" before the turn ended")
    tail = stderr_tail.strip()
    return TurnError(
        kind="cli_crashed",
        message=f"Claude Code {how}.",
        retryable=True,
        provider=PROVIDER,
        exit_code=returncode,
        stderr_tail=tail or None,
    )


def _kind_from_text(text: str) -> FailureKind:
    match = _API_STATUS_TEXT.search(text)
    if match:
        return kind_for_api_error(int(match.group(1)), None)
    if _PROMPT_TOO_LONG_TEXT.search(text):
        return "invalid_request"
    if _USAGE_LIMIT_TEXT.search(text):
        return "usage_limit"
    if text.startswith("API Error") and _NETWORK_TEXT.search(text):
        return "network"
    return "unknown"


def _message(result: dict[str, Any], subtype: str | None, terminal_reason: str | None) -> str:
    errors = result.get("errors")
    if isinstance(errors, list):
        texts = [e for e in errors if isinstance(e, str) and e]
        if texts:
            return "; ".join(texts)
    text = _str(result.get("result"))
    if text:
        return text
    return f"Claude Code ended the turn with an error ({subtype}, {terminal_reason})."


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def retry_notice(raw: dict[str, Any]) -> RetryScheduled:
    """A ``system/api_retry`` line: the CLI retries a failed model request itself."""
    status = as_opt_int(raw.get("error_status"))
    category = _str(raw.get("error"))
    delay_ms = as_number(raw.get("retry_delay_ms"))
    if status is not None:
        message = f"Claude API error {status} ({category or 'unknown'}); the CLI retries."
    else:
        message = f"Claude API connection error ({category or 'unknown'}); the CLI retries."
    return RetryScheduled(
        source="cli",
        attempt=as_int(raw.get("attempt"), default=1),
        max_attempts=as_opt_int(raw.get("max_retries")),
        delay_s=delay_ms / 1000 if delay_ms is not None else None,
        kind=kind_for_api_retry(status, category),
        message=message,
    )

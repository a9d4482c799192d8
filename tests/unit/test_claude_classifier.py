"""Claude Code failures land in the shared taxonomy with the right retry advice."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from app.events import FailureKind
from app.providers.claude.classifier import (
    RETRYABLE_KINDS,
    error_for_exit,
    error_for_result,
    kind_for_api_error,
    kind_for_api_retry,
)


@pytest.mark.parametrize(
    ("status", "error", "expected"),
    [
        (429, None, "rate_limited"),
        (None, "rate_limit", "rate_limited"),
        (529, None, "overloaded"),
        (None, "overloaded", "overloaded"),
        (None, "overloaded_error", "overloaded"),
        # 2.1.330 labels an exhausted 529 "server_error"; the status wins.
        (529, "server_error", "overloaded"),
        (500, None, "server_error"),
        (503, "unknown", "server_error"),
        (None, "server_error", "server_error"),
        (None, "api_error", "server_error"),
        (401, None, "auth"),
        (403, None, "auth"),
        (None, "authentication_failed", "auth"),
        (None, "authentication_error", "auth"),
        (None, "oauth_org_not_allowed", "auth"),
        (None, "billing_error", "usage_limit"),
        (400, None, "invalid_request"),
        (404, None, "invalid_request"),
        # The CLI files every status >= 408 it does not know under "server_error".
        (413, "server_error", "invalid_request"),
        (None, "invalid_request", "invalid_request"),
        (None, "model_not_found", "invalid_request"),
        (408, None, "network"),
        (None, "Connection refused", "network"),
        (None, "ECONNRESET", "network"),
        (None, "fetch failed", "network"),
        (None, "unknown", "unknown"),
        (None, None, "unknown"),
        (418, None, "unknown"),
    ],
)
def test_api_errors_are_classified_by_status_then_category(
    status: int | None, error: str | None, expected: FailureKind
) -> None:
    assert kind_for_api_error(status, error) == expected


@pytest.mark.parametrize(
    ("status", "error", "expected"),
    [
        (529, "overloaded", "overloaded"),
        (429, "rate_limit", "rate_limited"),
        # Connection failures arrive without a status and the category "unknown".
        (None, "unknown", "network"),
        (None, None, "network"),
        (None, "cloud_credential_error", "auth"),
        (418, "server_error", "server_error"),
    ],
)
def test_api_retry_notices_without_status_are_network_failures(
    status: int | None, error: str | None, expected: FailureKind
) -> None:
    assert kind_for_api_retry(status, error) == expected


OVERLOADED_RESULT: dict[str, Any] = {
    "type": "result",
    "subtype": "success",
    "is_error": True,
    "api_error_status": 529,
    "api_error_type": "overloaded_error",
    "terminal_reason": "api_error",
    "result": "API Error: 529 Overloaded. This is a server-side issue, usually temporary.",
}


@pytest.mark.parametrize(
    ("result", "kind", "retryable"),
    [
        (OVERLOADED_RESULT, "overloaded", True),
        (
            {
                "subtype": "success",
                "is_error": True,
                "terminal_reason": "api_error",
                "api_error_status": None,
                "result": "API Error: Connection refused while reaching 127.0.0.1",
            },
            "network",
            True,
        ),
        (
            {"terminal_reason": "api_error", "api_error_status": 401, "result": "API Error: 401"},
            "auth",
            False,
        ),
        ({"terminal_reason": "api_error", "api_error_type": "billing_error"}, "usage_limit", False),
        (
            {"terminal_reason": "api_error", "result": "API Error: 429 rate limited"},
            "rate_limited",
            True,
        ),
        ({"api_error_status": 500, "result": "API Error: 500"}, "server_error", True),
        (
            {"terminal_reason": "prompt_too_long", "result": "Prompt is too long"},
            "invalid_request",
            False,
        ),
        ({"subtype": "error_max_turns", "terminal_reason": "max_turns"}, "agent_error", False),
        ({"subtype": "error_max_turns"}, "agent_error", False),
        (
            {"subtype": "error_max_budget_usd", "terminal_reason": "budget_exhausted"},
            "agent_error",
            False,
        ),
        ({"subtype": "error_during_execution", "errors": ["boom"]}, "unknown", False),
        ({"result": "Prompt is too long"}, "invalid_request", False),
        ({"terminal_reason": "aborted_tools"}, "interrupted", False),
    ],
)
def test_error_results_are_classified(
    result: dict[str, Any], kind: FailureKind, retryable: bool
) -> None:
    error = error_for_result(result)

    assert error.kind == kind
    assert error.retryable is retryable
    assert error.provider == "claude_code"


def test_result_error_message_prefers_errors_then_result_text() -> None:
    assert (
        error_for_result({"errors": ["first", "second"], "result": "x"}).message == "first; second"
    )
    assert error_for_result(OVERLOADED_RESULT).message.startswith("API Error: 529 Overloaded.")
    assert "error_max_turns" in error_for_result({"subtype": "error_max_turns"}).message


def test_retry_advice_follows_the_kind() -> None:
    assert (
        frozenset(
            {"rate_limited", "overloaded", "server_error", "network", "idle_timeout", "cli_crashed"}
        )
        == RETRYABLE_KINDS
    )


@pytest.mark.parametrize(
    ("returncode", "stderr", "needle", "tail"),
    [
        (1, "Error: boom\n", "exited with code 1", "Error: boom"),
        (-9, "", "SIGKILL", None),
        (-200, " ", "signal 200", None),
        (None, "", "exit status unknown", None),
    ],
)
def test_a_process_that_dies_without_a_result_is_a_retryable_crash(
    returncode: int | None, stderr: str, needle: str, tail: str | None
) -> None:
    error = error_for_exit(returncode, stderr)

    assert error.kind == "cli_crashed"
    assert error.retryable is True
    assert needle in error.message
    assert error.exit_code == returncode
    assert error.stderr_tail == tail
    assert error.provider == "claude_code"


# A subscription's usage limit, as Claude Code 2.1.330 with a claude.ai login printed it
# against a 429 whose unified rate-limit headers said "rejected" (stub ``[[usage_limit]]``).
USAGE_LIMIT_RESULT: dict[str, Any] = {
    "type": "result",
    "subtype": "success",
    "is_error": True,
    "terminal_reason": "api_error",
    "api_error_status": 429,
    "api_error_type": "rate_limit_error",
    "api_error": "usage_limit_reached",
    "result": "You've hit your 5-hour limit · resets 2:29pm (UTC)",
}


def test_a_usage_limit_says_when_it_resets() -> None:
    raw = {
        **USAGE_LIMIT_RESULT,
        "api_error_params": {
            "rate_limit_info": {"status": "rejected", "resetsAt": 1795703382, "rateLimitType": "x"}
        },
    }
    error = error_for_result(raw)
    assert error.kind == "usage_limit"
    assert not error.retryable
    assert error.resets_at == datetime.fromtimestamp(1795703382, tz=UTC)


def test_a_usage_limit_without_its_reset_is_still_a_usage_limit() -> None:
    error = error_for_result(USAGE_LIMIT_RESULT)
    assert (error.kind, error.resets_at) == ("usage_limit", None)


def test_an_api_key_429_is_a_rate_limit_not_a_usage_limit() -> None:
    raw = {k: v for k, v in USAGE_LIMIT_RESULT.items() if k != "api_error"}
    raw["result"] = "API Error: Request rejected (429) · You have reached your usage limit."
    assert error_for_result(raw).kind == "rate_limited"

"""Codex failures map to the shared failure kinds, with retry advice per reference §2.4."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from app.events import FailureKind
from app.providers.codex.classifier import (
    error_for_resume,
    error_for_rpc,
    error_for_turn,
    kind_for_error_info,
    kind_for_status,
    retry_notice,
    server_lost_error,
    usage_reset,
)


@pytest.mark.parametrize(
    ("info", "kind", "retryable"),
    [
        ("contextWindowExceeded", "invalid_request", False),
        ("sessionBudgetExceeded", "usage_limit", False),
        ("usageLimitExceeded", "usage_limit", False),
        ("rateLimitExceeded", "rate_limited", True),
        ("serverOverloaded", "overloaded", True),
        ("flexUnavailable", "overloaded", True),
        ("modelNotFound", "invalid_request", False),
        ("cyberPolicy", "agent_error", False),
        ("bioPolicy", "agent_error", False),
        ("policyCapacityUnavailable", "agent_error", False),
        ("internalServerError", "server_error", True),
        ("unauthorized", "auth", False),
        ("badRequest", "invalid_request", False),
        ("sandboxError", "agent_error", False),
        ("inferenceHookDenied", "agent_error", False),
        ({"httpConnectionFailed": {"httpStatusCode": 401}}, "auth", False),
        ({"responseTooManyFailedAttempts": {"httpStatusCode": 429}}, "rate_limited", True),
        ({"responseStreamConnectionFailed": {"httpStatusCode": 502}}, "server_error", True),
        ({"responseStreamDisconnected": {"httpStatusCode": None}}, "network", True),
        ({"activeTurnNotSteerable": {"turnKind": "review"}}, "invalid_request", False),
        ("other", "unknown", False),
        (None, "unknown", False),
        ("somethingNew", "unknown", False),
    ],
)
def test_codex_error_info_decides_the_kind(info: Any, kind: FailureKind, retryable: bool) -> None:
    error = error_for_turn({"message": "failed", "codexErrorInfo": info})
    assert (error.kind, error.retryable, error.provider) == (kind, retryable, "codex")


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        # Recorded: a stream cut that outlived the retries (app-server_disc).
        (
            "stream disconnected before completion: stream closed before response.completed",
            "network",
        ),
        ("unexpected status 401 Unauthorized: bad key, url: http://127.0.0.1/v1", "auth"),
        (
            "We\u2019re currently experiencing high demand, which may cause temporary errors.",
            "server_error",
        ),
        ("the model refused", "unknown"),
    ],
)
def test_other_errors_fall_back_to_their_text(message: str, kind: FailureKind) -> None:
    assert kind_for_error_info("other", message) == kind


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (None, "network"),
        (429, "rate_limited"),
        (403, "auth"),
        (408, "network"),
        (503, "overloaded"),
        (529, "overloaded"),
        (500, "server_error"),
        (413, "invalid_request"),
        (302, "unknown"),
    ],
)
def test_http_statuses(status: int | None, kind: FailureKind) -> None:
    assert kind_for_status(status) == kind


def test_the_message_includes_the_details() -> None:
    error = error_for_turn(
        {"message": "failed", "additionalDetails": "why", "codexErrorInfo": None}
    )
    assert error.message == "failed (why)"
    assert error_for_turn(None).message == "Codex ended the turn with an error."


def test_a_retry_notice_carries_attempt_budget_and_reason() -> None:
    notice = retry_notice(
        {
            "willRetry": True,
            "error": {
                "message": "Reconnecting... 3/5",
                "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": None}},
                "additionalDetails": "stream disconnected before completion",
            },
        }
    )
    assert (notice.source, notice.attempt, notice.max_attempts, notice.delay_s, notice.kind) == (
        "cli",
        3,
        5,
        None,
        "network",
    )
    assert (
        notice.message == "Codex retries the model request: stream disconnected before completion"
    )
    bare = retry_notice({"error": {"message": "retrying"}})
    assert (bare.attempt, bare.max_attempts) == (1, None)


def test_rpc_errors() -> None:
    assert (
        error_for_rpc("turn/start", -32001, "Server overloaded; retry later.").kind == "overloaded"
    )
    assert error_for_rpc("turn/start", -32001, "x").retryable
    assert error_for_rpc("turn/start", -32600, "bad").kind == "invalid_request"
    assert error_for_rpc("turn/start", -1, "odd").kind == "unknown"


def test_a_thread_codex_no_longer_has_is_context_lost() -> None:
    lost = error_for_resume("T1", -32600, "no rollout found for thread id T1")
    assert (lost.kind, lost.retryable) == ("context_lost", False)
    assert "T1" in lost.message
    assert error_for_resume("T1", -32001, "Server overloaded; retry later.").kind == "overloaded"


@pytest.mark.parametrize(
    ("returncode", "how"),
    [(3, "exited with code 3"), (-9, "was killed by SIGKILL"), (None, "stopped")],
)
def test_a_lost_server_is_a_retryable_crash_with_its_stderr(
    returncode: int | None, how: str
) -> None:
    error = server_lost_error("it closed its output", returncode, "  panic: oops\n")
    assert (error.kind, error.retryable, error.exit_code) == ("cli_crashed", True, returncode)
    assert how in error.message
    assert error.stderr_tail == "panic: oops"
    assert server_lost_error("x", 1, "").stderr_tail is None


# `account/rateLimits/updated` as codex 0.169.0 sent it just before a usageLimitExceeded
# failure (stub ``[[usage_limit]]``: the x-codex-primary-* headers of the 429).
SPENT = {
    "limitId": "codex",
    "primary": {"usedPercent": 100, "windowDurationMins": 300, "resetsAt": 1795703401},
    "secondary": None,
}


def test_the_reset_of_a_spent_window_is_when_the_usage_limit_ends() -> None:
    assert usage_reset(SPENT) == datetime.fromtimestamp(1795703401, tz=UTC)


def test_the_later_of_two_spent_windows_wins_and_unspent_ones_do_not_count() -> None:
    both = {
        "primary": {"usedPercent": 100, "resetsAt": 1795703401},
        "secondary": {"usedPercent": 100.0, "resetsAt": 1795800000},
    }
    assert usage_reset(both) == datetime.fromtimestamp(1795800000, tz=UTC)
    assert usage_reset({"primary": {"usedPercent": 42, "resetsAt": 1795703401}}) is None
    assert usage_reset(None) is None
    assert usage_reset({"primary": {"usedPercent": 100, "resetsAt": "soon"}}) is None

"""OpenCode's errors in the shared failure taxonomy."""

from __future__ import annotations

import signal
from typing import Any

import pytest

from app.events import FailureKind
from app.providers.opencode.classifier import (
    error_for_exit,
    error_for_session_error,
    kind_for_retry,
)


def api_error(message: str, status: int | None = None, retryable: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {"message": message, "isRetryable": retryable}
    if status is not None:
        data["statusCode"] = status
    return {"name": "APIError", "data": data}


@pytest.mark.parametrize(
    ("error", "kind", "retryable"),
    [
        (api_error("Unauthorized: {...}", 401), "auth", False),
        (api_error("Too Many Requests", 429, True), "rate_limited", True),
        (api_error("Internal Server Error: {...}", 500, True), "server_error", True),
        (api_error("Overloaded", 529, True), "overloaded", True),
        (api_error("Bad Request: context too long", 400), "invalid_request", False),
        (api_error("You exceeded your current quota", 402), "usage_limit", False),
        (api_error("Provider is overloaded", None, True), "overloaded", True),
        (api_error("fetch failed: ECONNREFUSED", None, True), "network", True),
        (api_error("something odd", None, True), "server_error", True),
        (api_error("something odd", None, False), "unknown", False),
        (
            {"name": "ProviderAuthError", "data": {"providerID": "x", "message": "no"}},
            "auth",
            False,
        ),
        (
            {"name": "ContextOverflowError", "data": {"message": "too long"}},
            "invalid_request",
            False,
        ),
        ({"name": "MessageOutputLengthError", "data": {}}, "agent_error", False),
        (
            {"name": "StructuredOutputError", "data": {"message": "m", "retries": 2}},
            "agent_error",
            False,
        ),
        ({"name": "ContentFilterError", "data": {"message": "filtered"}}, "agent_error", False),
        (
            {"name": "UnknownError", "data": {"message": "Model not found: a/b."}},
            "invalid_request",
            False,
        ),
        ({"name": "UnknownError", "data": {"message": "socket hang up"}}, "network", True),
        ({"name": "UnknownError", "data": {"message": "???"}}, "unknown", False),
        ({"name": "BrandNewError"}, "unknown", False),
        ({}, "unknown", False),
    ],
)
def test_session_errors_are_classified(
    error: dict[str, Any], kind: FailureKind, retryable: bool
) -> None:
    classified = error_for_session_error(error)
    assert (classified.kind, classified.retryable, classified.provider) == (
        kind,
        retryable,
        "opencode",
    )
    assert classified.message


def test_an_abort_is_an_interruption() -> None:
    error = error_for_session_error({"name": "MessageAbortedError", "data": {"message": "Aborted"}})
    assert (error.kind, error.retryable) == ("interrupted", False)
    assert "Aborted" in error.message


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("Provider is overloaded", "overloaded"),
        ('Internal Server Error: {"error": {"type": "server_error"}}', "server_error"),
        ("Rate limit exceeded", "rate_limited"),
        ("Connection reset by peer", "network"),
        ("mysterious", "server_error"),
    ],
)
def test_retry_notices_are_classified_by_their_message(message: str, kind: FailureKind) -> None:
    assert kind_for_retry(message) == kind


def test_the_server_ending_is_a_retryable_crash_with_its_stderr() -> None:
    crashed = error_for_exit(3, "  fatal: boom\n")
    assert (crashed.kind, crashed.retryable, crashed.exit_code) == ("cli_crashed", True, 3)
    assert crashed.stderr_tail == "fatal: boom"
    assert "exited with code 3" in crashed.message
    killed = error_for_exit(-signal.SIGKILL, "")
    assert "SIGKILL" in killed.message
    assert killed.stderr_tail is None
    assert "stopped answering" in error_for_exit(None, "").message

"""Claude Code's control protocol and odd lines as normalized items: approvals and their
withdrawal, unsupported requests, rate-limit warnings, retries, garbage."""

from __future__ import annotations

import pytest

from app.events import RetryScheduled, Warning
from app.providers.base import ApprovalRequest
from app.providers.claude.normalizer import (
    ApprovalAsked,
    ApprovalWithdrawn,
    ClaudeNormalizer,
    ControlReply,
    UnsupportedControlRequest,
)
from tests.unit.claude_lines import feed_all, line

# --- control protocol and misc --------------------------------------------------------------


def test_cancelled_cli_request_withdraws_the_approval() -> None:
    assert feed_all([line({"type": "control_cancel_request", "request_id": "r1"})]) == [
        ApprovalWithdrawn(request_id="r1")
    ]


def test_other_cli_requests_are_flagged_for_an_error_answer() -> None:
    request = {"subtype": "hook_callback", "callback_id": "h", "input": {}}

    assert feed_all(
        [line({"type": "control_request", "request_id": "r2", "request": request})]
    ) == [UnsupportedControlRequest(request_id="r2", subtype="hook_callback")]


def test_approval_prefers_the_title_and_honours_suppressed_always_allow() -> None:
    request = {
        "subtype": "can_use_tool",
        "tool_name": "Write",
        "input": {"file_path": "/a"},
        "title": "Claude wants to write /a",
        "description": "write",
        "suppress_always_allow_rule": True,
    }

    [asked] = feed_all([line({"type": "control_request", "request_id": "r3", "request": request})])

    assert asked == ApprovalAsked(
        request=ApprovalRequest(
            request_id="r3",
            tool="Write",
            input={"file_path": "/a"},
            options=("allow", "deny"),
            title="Claude wants to write /a",
        ),
        suggestions=[],
    )


def test_failed_control_reply_carries_the_error() -> None:
    response = {"subtype": "error", "request_id": "req_1", "error": "No conversation found"}

    assert feed_all([line({"type": "control_response", "response": response})]) == [
        ControlReply(request_id="req_1", ok=False, error="No conversation found")
    ]


def test_rejected_rate_limit_is_a_warning_and_others_are_silent() -> None:
    rejected = {"status": "rejected", "resetsAt": 1_795_312_800, "rateLimitType": "five_hour"}

    assert feed_all(
        [
            line({"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}}),
            line({"type": "rate_limit_event", "rate_limit_info": rejected}),
        ]
    ) == [
        Warning(
            code="rate_limited",
            message="Claude usage limit reached (five_hour); resets at 2026-11-22T02:00:00+00:00",
        )
    ]


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\n",
        b"Debug: starting claude\n",
        b"\xff\xfe\x00garbage",
        b"{not json",
        b"[1, 2, 3]",
        b'"a string"',
        b"null",
        b"{}",
        b'{"type": "brand_new_type", "x": 1}',
        b'{"type": "system", "subtype": "brand_new_subtype"}',
        b'{"type": "system", "subtype": "status", "status": "requesting"}',
        b'{"type": "system", "subtype": "session_state_changed", "state": "idle"}',
        b'{"type": "system", "subtype": "task_started", "task_id": "t"}',
        b'{"type": "keep_alive"}',
        b'{"type": "tool_progress", "tool_use_id": "t", "elapsed_time_seconds": 3}',
        b'{"type": "stream_event", "event": {"type": "message_delta"}}',
        b'{"type": "stream_event", "event": "oops"}',
        b'{"type": "stream_event", "event": {"type": "brand_new_event", "index": 0}}',
        b'{"type": "assistant", "message": "oops"}',
        b'{"type": "assistant", "message": {"content": [{"type": "tool_use", "id": 1}]}}',
        b'{"type": "user", "message": {"content": [{"type": "tool_result"}]}}',
        b'{"type": "control_request", "request": {"subtype": "can_use_tool"}}',
        b'{"type": "control_response", "response": null}',
    ],
)
def test_garbage_and_unknown_lines_yield_nothing_and_never_raise(raw: bytes) -> None:
    assert ClaudeNormalizer().feed(raw) == []


def test_api_retry_with_missing_or_non_finite_fields_still_schedules() -> None:
    raw = (
        b'{"type": "system", "subtype": "api_retry", "error_status": null, "retry_delay_ms": 1e999}'
    )

    [retry] = ClaudeNormalizer().feed(raw)

    assert retry == RetryScheduled(
        source="cli",
        attempt=1,
        max_attempts=None,
        delay_s=None,
        kind="network",
        message="Claude API connection error (unknown); the CLI retries.",
    )

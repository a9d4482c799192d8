"""Every provider reads a model API's HTTP status in the one shared table (``faults``)."""

from __future__ import annotations

from typing import Any

import pytest

from app.events import FailureKind
from app.providers import faults
from app.providers.acp import faults as acp_faults
from app.providers.claude.classifier import error_for_result, kind_for_api_error, kind_for_api_retry
from app.providers.codex.classifier import kind_for_status as codex_kind_for_status
from app.providers.opencode.classifier import error_for_session_error


def _claude_result(status: int, text: str) -> dict[str, Any]:
    return {
        "type": "result",
        "subtype": "success",
        "is_error": True,
        "terminal_reason": "api_error",
        "api_error_status": status,
        "result": text,
    }


def test_a_402_from_claude_code_is_a_usage_limit() -> None:
    error = error_for_result(_claude_result(402, "API Error: 402 Payment Required"))
    assert error.kind == "usage_limit"
    assert kind_for_api_error(402, None) == "usage_limit"
    assert kind_for_api_retry(402, None) == "usage_limit"


def test_a_402_is_a_usage_limit_for_every_provider() -> None:
    assert codex_kind_for_status(402) == "usage_limit"
    opencode = error_for_session_error(
        {"name": "APIError", "data": {"message": "Payment Required", "statusCode": 402}}
    )
    assert opencode.kind == "usage_limit"
    assert acp_faults.classify("acp:gemini", "Payment Required", status=402).kind == "usage_limit"


@pytest.mark.parametrize("status", sorted({*faults.STATUS_KINDS, 500, 502, 418}))
def test_claude_code_reads_statuses_in_the_shared_table(status: int) -> None:
    expected: FailureKind = faults.kind_for_status(status) or "unknown"
    assert kind_for_api_error(status, None) == expected

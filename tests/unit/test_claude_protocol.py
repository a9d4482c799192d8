"""What the gateway writes to Claude Code's stdin, checked against the recorded real session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

from app.providers.base import ApprovalAnswer
from app.providers.claude import protocol

FIXTURES = Path(__file__).parent.parent / "fixtures" / "claude" / "reference"
INPUT: dict[str, JsonValue] = {"command": "touch created_by_mock.txt", "description": "create file"}
SUGGESTIONS: list[JsonValue] = [
    {
        "type": "addRules",
        "rules": [{"toolName": "Bash", "ruleContent": "touch created_by_mock.txt"}],
        "behavior": "allow",
        "destination": "localSettings",
    },
    {"type": "addDirectories", "directories": ["/srv/project"], "destination": "session"},
    {"type": "setMode", "mode": "acceptEdits", "destination": "session"},
]


def written(capture: str) -> list[Any]:
    """The messages the capture driver wrote to the real CLI's stdin."""
    text = (FIXTURES / f"stream-json_{capture}.txt").read_text(encoding="utf-8")
    return [json.loads(line[4:]) for line in text.splitlines() if line.startswith(">>> ")]


def decode(line: bytes) -> Any:
    assert not line.endswith(b"\n")
    assert b"\n" not in line
    return json.loads(line)


def test_initialize_and_user_message_match_what_the_real_cli_accepted() -> None:
    initialize, user = written("perm")[:2]

    assert decode(protocol.initialize_request("req_1")) == initialize
    assert decode(protocol.user_message("run echo hi")) == user


def test_user_message_is_one_compact_line_even_with_newlines_and_non_ascii() -> None:
    line = protocol.user_message("first line\nsecond — ünïcode\ud800")

    assert line.startswith(b'{"type":"user","message":{"role":"user","content":"first line\\n')
    assert decode(line)["message"]["content"] == "first line\nsecond — ünïcode\ud800"


def test_allow_echoes_the_original_input_like_the_recorded_answer() -> None:
    request_id = "95d1a12f-f560-443c-a18e-bed706343471"
    line = protocol.permission_response(request_id, ApprovalAnswer(decision="allow"), INPUT)

    assert decode(line) == written("perm")[2]


def test_allow_sends_the_clients_edited_input() -> None:
    edited: dict[str, JsonValue] = {"command": "touch other.txt"}
    answer = ApprovalAnswer(decision="allow", updated_input=edited)

    response = decode(protocol.permission_response("r", answer, INPUT))["response"]

    assert response == {
        "subtype": "success",
        "request_id": "r",
        "response": {"behavior": "allow", "updatedInput": edited},
    }


def test_deny_carries_the_clients_message_like_the_recorded_answer() -> None:
    request_id = "bfdcb975-cf9f-40cb-93f7-281298a7748b"
    answer = ApprovalAnswer(decision="deny", message="not allowed by gateway")

    assert decode(protocol.permission_response(request_id, answer, INPUT)) == written("deny")[2]


def test_deny_without_a_message_says_who_denied() -> None:
    line = protocol.permission_response("r", ApprovalAnswer(decision="deny"), INPUT)

    assert decode(line)["response"]["response"] == {
        "behavior": "deny",
        "message": protocol.DEFAULT_DENY_MESSAGE,
    }


def test_allow_session_adds_only_rule_suggestions_scoped_to_the_session() -> None:
    answer = ApprovalAnswer(decision="allow_session")

    line = protocol.permission_response("r", answer, INPUT, suggestions=SUGGESTIONS)

    assert decode(line)["response"]["response"] == {
        "behavior": "allow",
        "updatedInput": INPUT,
        "updatedPermissions": [
            {
                "type": "addRules",
                "rules": [{"toolName": "Bash", "ruleContent": "touch created_by_mock.txt"}],
                "behavior": "allow",
                "destination": "session",
            }
        ],
    }


@pytest.mark.parametrize("suggestions", [None, [], SUGGESTIONS[1:], ["junk", 3]])
def test_allow_session_without_usable_suggestions_is_a_plain_allow(
    suggestions: list[JsonValue] | None,
) -> None:
    answer = ApprovalAnswer(decision="allow_session")

    line = protocol.permission_response("r", answer, INPUT, suggestions=suggestions)

    assert decode(line)["response"]["response"] == {"behavior": "allow", "updatedInput": INPUT}


def test_plain_allow_ignores_suggestions() -> None:
    answer = ApprovalAnswer(decision="allow")

    line = protocol.permission_response("r", answer, INPUT, suggestions=SUGGESTIONS)

    assert "updatedPermissions" not in decode(line)["response"]["response"]


def test_interrupt_matches_the_recorded_request() -> None:
    recorded = written("interrupt")[3]

    assert decode(protocol.interrupt_request("req_int")) == recorded


def test_error_response_answers_an_unsupported_cli_request() -> None:
    line = protocol.error_response("hook-1", "hooks are not supported")

    assert decode(line) == {
        "type": "control_response",
        "response": {
            "subtype": "error",
            "request_id": "hook-1",
            "error": "hooks are not supported",
        },
    }

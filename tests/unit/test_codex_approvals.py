"""Codex server requests become approvals, and client decisions become Codex answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

from app.events import ApprovalDecision
from app.providers.base import ApprovalAnswer, ApprovalRequest
from app.providers.codex.approvals import (
    approval_request,
    auto_accepts,
    decision_result,
    options_for,
    refusal,
)
from app.providers.codex.protocol import ServerRequest
from tests.unit.test_codex_normalizer import read_capture

CHANGE: dict[str, JsonValue] = {"path": "/w/a.txt", "kind": {"type": "add"}, "diff": "+hello\n"}


def recorded_command_request() -> ServerRequest:
    return read_capture("accept").requests[0]


def file_request(**params: Any) -> ServerRequest:
    return ServerRequest(
        id=4,
        method="item/fileChange/requestApproval",
        params={"threadId": "T", "turnId": "U", "itemId": "p1", **params},
    )


def test_the_recorded_command_approval_becomes_an_approval_request() -> None:
    request = approval_request(recorded_command_request(), {})
    command = "/bin/bash -lc 'touch created_by_codex_mock.txt'"
    assert request == ApprovalRequest(
        request_id="0",
        tool="command",
        input={
            "command": command,
            "cwd": "/srv/project",
            "actions": [{"type": "unknown", "command": "touch created_by_codex_mock.txt"}],
        },
        # availableDecisions: accept, an execpolicy amendment, cancel.
        options=("allow", "deny"),
        title=f"Run {command}",
        tool_id="call_mock_1",
    )


def test_a_file_change_approval_carries_the_changes_of_its_item() -> None:
    request = approval_request(file_request(reason="new file", grantRoot="/w"), {"p1": [CHANGE]})
    assert request == ApprovalRequest(
        request_id="4",
        tool="file_change",
        input={"changes": [CHANGE], "reason": "new file", "grant_root": "/w"},
        options=("allow", "deny", "allow_session"),
        title="new file",
        tool_id="p1",
    )
    untitled = approval_request(file_request(), {"p1": [CHANGE]})
    assert untitled is not None
    assert untitled.title == "Change /w/a.txt"
    unknown_item = approval_request(file_request(), {})
    assert unknown_item is not None
    assert (unknown_item.input, unknown_item.title) == ({"changes": []}, None)


def test_other_server_requests_are_not_approvals() -> None:
    request = ServerRequest(id=1, method="item/permissions/requestApproval", params={})
    assert approval_request(request, {}) is None


@pytest.mark.parametrize(
    ("available", "options"),
    [
        (None, ("allow", "deny", "allow_session")),
        (["accept", "acceptForSession", "decline", "cancel"], ("allow", "deny", "allow_session")),
        (["accept", {"acceptWithExecpolicyAmendment": {}}, "cancel"], ("allow", "deny")),
        (["cancel"], ("deny",)),
        ([], ("deny",)),
    ],
)
def test_options_follow_available_decisions_and_always_allow_a_deny(
    available: Any, options: tuple[ApprovalDecision, ...]
) -> None:
    assert options_for(available) == options


def command(**input_: JsonValue) -> ApprovalRequest:
    return ApprovalRequest(request_id="0", tool="command", input={"command": "ls", **input_})


@pytest.mark.parametrize(
    ("decision", "available", "sent"),
    [
        ("allow", None, "accept"),
        ("allow_session", None, "acceptForSession"),
        ("allow_session", ["accept", "acceptForSession"], "acceptForSession"),
        # Not offered: the one-time accept is the closest Codex takes.
        ("allow_session", ["accept", "cancel"], "accept"),
        # Decline is answered even when not listed (0.169.0 listed only cancel; obs).
        ("deny", ["accept", "cancel"], "decline"),
        ("deny", None, "decline"),
    ],
)
def test_decisions_map_to_codex_answers(
    decision: ApprovalDecision, available: Any, sent: str
) -> None:
    answer = ApprovalAnswer(decision=decision, message="because")
    assert decision_result(answer, command(), available) == {"decision": sent}


def test_an_allow_with_edited_input_is_declined_since_codex_cannot_run_the_edit() -> None:
    edited = ApprovalAnswer(decision="allow", updated_input={"command": "rm -rf /"})
    same = ApprovalAnswer(decision="allow", updated_input={"command": "ls"})
    assert decision_result(edited, command(), None) == {"decision": "decline"}
    assert decision_result(same, command(), None) == {"decision": "accept"}


@pytest.mark.parametrize(
    ("method", "answer"),
    [
        ("item/commandExecution/requestApproval", {"decision": "decline"}),
        ("item/fileChange/requestApproval", {"decision": "decline"}),
        ("item/permissions/requestApproval", {"permissions": {}, "scope": "turn"}),
        ("mcpServer/elicitation/request", {"action": "decline"}),
        ("execCommandApproval", {"decision": "denied"}),
        ("applyPatchApproval", {"decision": "denied"}),
        ("item/tool/requestUserInput", None),
        ("item/tool/call", None),
        ("account/chatgptAuthTokens/refresh", None),
        ("something/new", None),
    ],
)
def test_requests_the_gateway_does_not_serve_get_a_refusal(
    method: str, answer: dict[str, Any] | None
) -> None:
    assert refusal(ServerRequest(id=1, method=method, params={})) == answer


def edit(*changes: dict[str, Any], **extra: JsonValue) -> ApprovalRequest:
    return ApprovalRequest(
        request_id="1", tool="file_change", input={"changes": list(changes), **extra}
    )


def test_auto_edits_accepts_edits_inside_the_workspace_only(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    (workspace / "escape").symlink_to(tmp_path)
    inside = {"path": str(workspace / "src" / "a.py"), "kind": {"type": "add"}, "diff": "+"}
    relative = {"path": "src/b.py", "kind": {"type": "update", "move_path": "src/c.py"}}
    assert auto_accepts("auto_edits", edit(inside, relative), workspace)

    refused = [
        edit({"path": str(tmp_path / "outside.py"), "kind": {"type": "add"}}),
        edit({"path": "../outside.py", "kind": {"type": "add"}}),
        edit({"path": "escape/outside.py", "kind": {"type": "add"}}),  # a symlink out
        edit({"path": "src/a.py", "kind": {"type": "update", "move_path": "/etc/passwd"}}),
        edit({"path": "src/a.py"}, grant_root="/"),
        edit(),
        edit({"kind": {"type": "add"}}),
    ]
    assert [auto_accepts("auto_edits", request, workspace) for request in refused] == [False] * 7


@pytest.mark.parametrize("mode", ["ask", "allow_all", "read_only"])
def test_other_modes_ask_the_client_for_every_edit(mode: Any, tmp_path: Path) -> None:
    change = {"path": str(tmp_path / "a.py"), "kind": {"type": "add"}}
    assert not auto_accepts(mode, edit(change), tmp_path)


def test_auto_edits_still_asks_for_commands(tmp_path: Path) -> None:
    assert not auto_accepts("auto_edits", command(cwd=str(tmp_path)), tmp_path)

"""The Claude Code command line is a pure function of the session spec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.events import APPROVAL_MODES, ApprovalMode
from app.providers.base import SessionSpec
from app.providers.claude.argv import NO_MCP_SERVERS, build_argv, permission_mode


def spec(
    *,
    approval_mode: ApprovalMode = "ask",
    model: str | None = None,
    thread_id: str | None = None,
) -> SessionSpec:
    return SessionSpec(
        session_id="ses_1",
        workspace=Path("/srv/project"),
        model=model,
        approval_mode=approval_mode,
        thread_id=thread_id,
    )


def test_new_session_in_ask_mode_gets_the_full_headless_command_line() -> None:
    assert build_argv(executable="/usr/bin/claude", spec=spec()) == [
        "/usr/bin/claude",
        "--output-format",
        "stream-json",
        "--verbose",
        "--input-format",
        "stream-json",
        "--include-partial-messages",
        "--permission-prompt-tool=stdio",
        "--permission-mode",
        "default",
        "--setting-sources",
        "user",
        '--mcp-config={"mcpServers":{}}',
        "--strict-mcp-config",
    ]


@pytest.mark.parametrize(
    ("approval_mode", "expected"),
    [
        ("ask", "default"),
        ("auto_edits", "acceptEdits"),
        ("allow_all", "bypassPermissions"),
        ("read_only", "dontAsk"),
    ],
)
def test_each_approval_mode_maps_to_its_permission_mode(
    approval_mode: ApprovalMode, expected: str
) -> None:
    argv = build_argv(executable="claude", spec=spec(approval_mode=approval_mode))

    assert permission_mode(approval_mode) == expected
    assert argv[argv.index("--permission-mode") + 1] == expected


def test_every_approval_mode_has_a_permission_mode() -> None:
    assert {permission_mode(mode) for mode in APPROVAL_MODES} == {
        "default",
        "acceptEdits",
        "bypassPermissions",
        "dontAsk",
    }


def test_model_is_passed_when_set() -> None:
    argv = build_argv(executable="claude", spec=spec(model="claude-sonnet-4-5"))

    assert argv[-2:] == ["--model", "claude-sonnet-4-5"]


def test_no_model_flag_without_a_model() -> None:
    assert "--model" not in build_argv(executable="claude", spec=spec())


def test_resume_uses_the_equals_form_so_a_dash_leading_id_stays_a_value() -> None:
    argv = build_argv(executable="claude", spec=spec(thread_id="-weird-id"))

    assert argv[-1] == "--resume=-weird-id"
    assert "--resume" not in argv


def test_no_resume_flag_for_a_new_thread() -> None:
    argv = build_argv(executable="claude", spec=spec())

    assert not any(arg.startswith("--resume") for arg in argv)


def test_extra_args_come_last_after_model_and_resume() -> None:
    argv = build_argv(
        executable="claude",
        spec=spec(model="opus", thread_id="abc"),
        extra_args=["--max-turns", "5"],
    )

    assert argv[-5:] == ["--model", "opus", "--resume=abc", "--max-turns", "5"]


@pytest.mark.parametrize("approval_mode", APPROVAL_MODES)
def test_t7_workspace_configuration_is_pinned_out_in_every_mode(
    approval_mode: ApprovalMode,
) -> None:
    argv = build_argv(executable="claude", spec=spec(approval_mode=approval_mode))

    # Only the user's settings; the gateway's (empty) MCP config and no other; an explicit mode.
    assert argv[argv.index("--setting-sources") + 1] == "user"
    assert f"--mcp-config={NO_MCP_SERVERS}" in argv
    assert json.loads(NO_MCP_SERVERS) == {"mcpServers": {}}
    assert "--strict-mcp-config" in argv
    assert argv[argv.index("--permission-mode") + 1] == permission_mode(approval_mode)
    assert "--dangerously-skip-permissions" not in argv
    assert "--allow-dangerously-skip-permissions" not in argv


def test_t8_nothing_from_the_prompt_or_thread_id_becomes_a_separate_flag() -> None:
    argv = build_argv(
        executable="claude", spec=spec(thread_id="--dangerously-skip-permissions ; rm -rf ~")
    )

    assert argv[-1] == "--resume=--dangerously-skip-permissions ; rm -rf ~"
    assert "--dangerously-skip-permissions" not in argv


def test_t7_project_config_lets_the_workspace_settings_and_mcp_servers_load() -> None:
    argv = build_argv(executable="claude", spec=spec(), project_config=True)

    assert argv[argv.index("--setting-sources") + 1] == "user,project,local"
    assert "--strict-mcp-config" not in argv
    assert not any(arg.startswith("--mcp-config") for arg in argv)

"""The Claude Code command line: a pure function of the session spec."""

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_never

from app.events import ApprovalMode
from app.providers.base import SessionSpec

__all__ = ["NO_MCP_SERVERS", "build_argv", "permission_mode"]

NO_MCP_SERVERS = '{"mcpServers":{}}'
"""The MCP configuration the gateway gives Claude Code: no servers."""


def permission_mode(mode: ApprovalMode) -> str:
    """Return the ``--permission-mode`` value that enforces a gateway approval mode."""
    match mode:
        case "ask":
            # Anything not pre-approved reaches us as a `can_use_tool` control request.
            # CLI 2.1.330 `--help` calls this mode `manual`; `default` is still accepted and
            # is what `system/init.permissionMode` reports.
            return "default"
        case "auto_edits":
            return "acceptEdits"
        case "allow_all":
            return "bypassPermissions"
        case "read_only":
            # `dontAsk` denies whatever would prompt: reads (auto-allowed) proceed, writes and
            # commands that need approval are refused, and the agent keeps working normally.
            # `plan` would also block writes but makes the agent plan instead of act.
            return "dontAsk"
        case _:
            assert_never(mode)


def build_argv(
    *,
    executable: str,
    spec: SessionSpec,
    extra_args: Sequence[str] = (),
    project_config: bool = False,
) -> list[str]:
    """Return the argv that starts one long-lived, headless Claude Code process for ``spec``.

    The process reads user turns and control messages as stream-json on stdin and prints
    stream-json on stdout; the prompt is never on the command line. ``project_config``
    (``providers.claude_code.project_config``) lets the workspace's own settings and MCP
    servers load. ``extra_args`` come last, as the operator's escape hatch for flags this
    builder does not know.
    """
    argv = [
        executable,
        "--output-format",
        "stream-json",
        "--verbose",  # required by stream-json output
        "--input-format",
        "stream-json",
        "--include-partial-messages",
        # Hidden from `--help` in 2.1.330 but what both official SDKs send: approvals travel
        # as control requests on stdin/stdout.
        "--permission-prompt-tool=stdio",
        # Always explicit: a settings file's `defaultMode` never decides.
        "--permission-mode",
        permission_mode(spec.approval_mode),
        *(_PROJECT_CONFIG if project_config else _NO_PROJECT_CONFIG),
    ]
    if spec.model is not None:
        argv += ["--model", spec.model]
    if spec.thread_id is not None:
        # `--resume` takes an optional value, so a dash-leading id would be read as a flag;
        # the SDKs use the `=` form for the same reason.
        argv.append(f"--resume={spec.thread_id}")
    elif spec.fork_from is not None:
        # A fork's first process: the CLI copies the thread (up to the entry `at`) into a
        # new one and reports its id (app/providers/claude/forks.py).
        argv += [f"--resume={spec.fork_from.thread_id}", "--fork-session"]
        if spec.fork_from.at is not None:
            # Hidden from `--help` in 2.1.332; the Agent SDK's `resumeSessionAt`.
            argv.append(f"--resume-session-at={spec.fork_from.at}")
    argv.extend(extra_args)
    return argv


_NO_PROJECT_CONFIG = (
    # Only the user's own settings (auth, model defaults). A workspace is untrusted input:
    # with `user` alone, 2.1.330 loads none of its .claude/settings.json and
    # settings.local.json (hooks, permission rules, defaultMode), .claude/agents,
    # .claude/skills, .claude/commands, nor its CLAUDE.md (observed, threat model T7).
    "--setting-sources",
    "user",
    # The gateway's own MCP configuration (none), and nothing else: no .mcp.json from the
    # workspace, no servers from the user's config. The `=` form keeps this variadic
    # option from taking the next argument as a second config.
    f"--mcp-config={NO_MCP_SERVERS}",
    "--strict-mcp-config",
)
_PROJECT_CONFIG = (
    # The operator allows the workspace's config: Claude Code's own default sources. Its
    # .mcp.json servers start as Claude Code decides (the project's or user's approval,
    # e.g. `enableAllProjectMcpServers`), and the user's own MCP servers load too.
    "--setting-sources",
    "user,project,local",
)

"""``providers.<name>.project_config``: the workspace's own agent configuration (MCP servers,
hooks, settings) is off unless the operator allows it, per provider (threat model T7).

For the ACP agents Gemini CLI, Qwen Code and CodeBuddy Code, a workspace that defines an MCP
server and hooks in its ``.gemini/``, ``.qwen/`` or ``.codebuddy/settings.json`` (CodeBuddy's
server in ``.mcp.json``) starts none of them, even when the operator's own agent trusts the
folder; with ``project_config = true`` the same fixture's hooks run, so it is known to be
hostile. Copilot CLI has no switch: its ``.github/hooks`` run either way (the default case is
an expected failure that reports when that changes). For Claude Code, ``project_config =
true`` lets the workspace's ``.claude/settings.json`` hooks, ``.mcp.json`` servers and
``CLAUDE.md`` through (the pinned default is in test_hostile_workspaces.py).

Every test drives the pinned real CLI through a real gateway process against the stub LLM on
loopback (tests/e2e/cli_harness.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.cli_harness import (
    create_session,
    kinds,
    marks,
    model_request_text,
    run_turn,
    wait_for_marks,
)
from tests.e2e.conftest import GatewayFactory
from tests.e2e.test_hostile_workspaces import CONTEXT_MARKER, plant_claude, touch
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    """Where a hostile hook would leave its mark: outside the workspace."""
    path = tmp_path / "markers"
    path.mkdir()
    return path


def writable(markers: Path) -> dict[str, Any]:
    """The sandbox lets a hook the agent ran leave its mark: one that never appears was never
    made (not merely kept out of the markers' directory)."""
    return {"read_write": [str(markers)]}


def plant(agent: Agent, workspace: Path, markers: Path) -> None:
    """The agent's settings files with a stdio MCP server (or that server in ``mcp_file``) and
    hooks (and its context file)."""
    hooks = {
        event: [{"matcher": "*", "hooks": [{"type": "command", "command": touch(markers, event)}]}]
        for event in agent.events
    }
    servers = {"evil": {"command": "sh", "args": ["-c", touch(markers, "mcp")]}}
    settings: dict[str, Any] = {**agent.settings, "hooks": hooks}
    if agent.mcp_file is None:
        settings["mcpServers"] = servers
    else:
        (workspace / agent.mcp_file).write_text(json.dumps({"mcpServers": servers}))
    (workspace / agent.directory).mkdir(parents=True)
    for name in agent.settings_files:
        (workspace / agent.directory / name).write_text(json.dumps(settings))
    if agent.context_file is not None:
        (workspace / agent.context_file).write_text(CONTEXT_MARKER + "\n")


def plant_copilot(agent: Agent, workspace: Path, markers: Path) -> None:
    """Copilot CLI's hook files (their own schema) and an MCP server in ``.mcp.json``."""
    hooks = {event: [{"type": "command", "bash": touch(markers, event)}] for event in agent.events}
    (workspace / agent.directory).mkdir(parents=True)
    hooks_file = workspace / agent.directory / "gateway.json"
    hooks_file.write_text(json.dumps({"version": 1, "hooks": hooks}))
    servers = {"evil": {"type": "local", "command": "sh", "args": ["-c", touch(markers, "mcp")]}}
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    if agent.context_file is not None:
        (workspace / agent.context_file).write_text(CONTEXT_MARKER + "\n")


def trust_folder(agent: Agent, home: Path, workspace: Path) -> None:
    """What the operator's own agent writes once they trusted the folder."""
    directory = home / agent.directory
    directory.mkdir(parents=True, exist_ok=True)
    trusted = {str(workspace): "TRUST_FOLDER"}
    (directory / "trustedFolders.json").write_text(json.dumps(trusted))


def trust_codebuddy(agent: Agent, home: Path, workspace: Path) -> None:
    """The operator's CodeBuddy trusts the folder and approves every project MCP server."""
    directory = home / ".codebuddy"
    directory.mkdir(parents=True, exist_ok=True)
    settings = {"trustedDirectories": [str(workspace)], "enableAllProjectMcpServers": True}
    (directory / "settings.json").write_text(json.dumps(settings))


def trust_copilot(agent: Agent, home: Path, workspace: Path) -> None:
    """Copilot CLI keeps the folders trusted for good in its config.json."""
    directory = home / ".copilot"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps({"trusted_folders": [str(workspace)]}))


@dataclass(frozen=True)
class Agent:
    """Where one ACP agent reads a workspace's config, the hook events planted for it and the
    marks the planted config leaves when the agent honours it."""

    directory: str
    events: tuple[str, ...]
    leaves: frozenset[str]
    context_file: str | None = None
    mcp_file: str | None = None
    """Where the workspace declares its MCP server, when not in the settings file."""
    settings: dict[str, Any] = field(default_factory=dict)
    """More of the workspace's settings."""
    settings_files: tuple[str, ...] = ("settings.json",)
    plant: Callable[[Agent, Path, Path], None] = plant
    trust: Callable[[Agent, Path, Path], None] = trust_folder
    switch: bool = True
    """False: the gateway knows no way to keep the agent from it (``project_config`` None)."""


AGENTS = {
    # Gemini CLI 0.61 runs no SessionStart hook in ACP mode.
    "acp:gemini": Agent(
        directory=".gemini",
        events=("BeforeAgent",),
        leaves=frozenset({"mcp", "BeforeAgent"}),
        context_file="GEMINI.md",
    ),
    # Qwen Code 0.24.4 starts a workspace's stdio MCP server only once it is approved.
    "acp:qwen": Agent(
        directory=".qwen",
        events=("SessionStart", "UserPromptSubmit", "Stop"),
        leaves=frozenset({"SessionStart", "UserPromptSubmit", "Stop"}),
    ),
    # CodeBuddy Code 2.117.0 starts a .mcp.json server that settings.local.json approves (the
    # approval in settings.json alone is ignored). Its CODEBUDDY.md reaches the prompt either
    # way (no switch), so none is planted.
    "acp:codebuddy": Agent(
        directory=".codebuddy",
        events=("SessionStart", "UserPromptSubmit", "Stop"),
        leaves=frozenset({"mcp", "SessionStart", "UserPromptSubmit", "Stop"}),
        mcp_file=".mcp.json",
        settings={"enableAllProjectMcpServers": True},
        settings_files=("settings.json", "settings.local.json"),
        trust=trust_codebuddy,
    ),
    # Copilot CLI 1.0.102 starts a .mcp.json server only in a folder it trusts; its
    # .github/hooks and instructions load in any folder.
    "acp:copilot": Agent(
        directory=".github/hooks",
        events=("sessionStart", "userPromptSubmitted"),
        leaves=frozenset({"sessionStart", "userPromptSubmitted"}),
        context_file=".github/copilot-instructions.md",
        plant=plant_copilot,
        trust=trust_copilot,
        switch=False,
    ),
}


NO_SWITCH = pytest.mark.xfail(
    strict=True, reason="the gateway knows no way to keep this agent from the workspace's config"
)


@pytest.mark.parametrize(
    "provider",
    [pytest.param(name, marks=() if AGENTS[name].switch else NO_SWITCH) for name in sorted(AGENTS)],
)
def test_acp_workspace_config_is_off_even_when_the_operator_trusts_the_folder(
    make_gateway: GatewayFactory,
    stub: StubLLM,
    workspace: Path,
    markers: Path,
    tmp_path: Path,
    provider: str,
) -> None:
    agent = AGENTS[provider]
    agent.plant(agent, workspace, markers)
    agent.trust(agent, tmp_path / "home", workspace)
    gateway = make_gateway(provider, sandbox=writable(markers)).start()
    with gateway.client() as client:
        session_id = create_session(client, workspace, approval_mode="ask")
        events = run_turn(client, session_id, "hello")

    assert events[-1]["type"] == "turn.completed", kinds(events)
    assert marks(markers) == []  # no MCP server, no hook
    assert CONTEXT_MARKER not in model_request_text(stub)


@pytest.mark.parametrize("provider", sorted(AGENTS))
def test_acp_workspace_config_loads_when_the_operator_allows_it(
    make_gateway: GatewayFactory, stub: StubLLM, workspace: Path, markers: Path, provider: str
) -> None:
    agent = AGENTS[provider]
    agent.plant(agent, workspace, markers)
    allowed = {provider: {"project_config": True}}
    gateway = make_gateway(provider, sandbox=writable(markers), **allowed).start()
    with gateway.client() as client:
        session_id = create_session(client, workspace, approval_mode="ask")
        events = run_turn(client, session_id, "hello")

    assert events[-1]["type"] == "turn.completed", kinds(events)
    assert set(wait_for_marks(markers, set(agent.leaves))) >= agent.leaves
    if agent.context_file is not None:
        assert CONTEXT_MARKER in model_request_text(stub)


def test_claude_workspace_config_loads_when_the_operator_allows_it(
    make_gateway: GatewayFactory, stub: StubLLM, workspace: Path, markers: Path
) -> None:
    plant_claude(workspace, markers)
    allowed = {"project_config": True}
    gateway = make_gateway("claude_code", sandbox=writable(markers), claude_code=allowed).start()
    with gateway.client() as client:
        session_id = create_session(client, workspace, approval_mode="ask")
        events = run_turn(client, session_id, "hello")

    assert events[-1]["type"] == "turn.completed", kinds(events)
    expected = {"mcp", "settings.json-SessionStart", "settings.local.json-UserPromptSubmit"}
    assert expected <= set(wait_for_marks(markers, expected))
    assert CONTEXT_MARKER in model_request_text(stub)

"""``providers.<name>.project_config``: the workspace's own agent configuration (MCP servers,
hooks, settings) is off unless the operator allows it, per provider (threat model T7).

For the ACP agents Gemini CLI, Qwen Code and CodeBuddy Code, a workspace that defines an MCP
server and hooks in its ``.gemini/``, ``.qwen/`` or ``.codebuddy/settings.json`` (CodeBuddy's
server in ``.mcp.json``) starts none of them, even when the operator's own agent trusts the
folder; with ``project_config = true`` the same fixture's hooks run, so it is known to be
hostile. Gemini CLI and Qwen Code then refuse their privileged modes, which is a 422 at
creation. For Claude Code, ``project_config = true`` lets the workspace's
``.claude/settings.json`` hooks, ``.mcp.json`` servers and ``CLAUDE.md`` through (the pinned
default is in test_hostile_workspaces.py). The Claude Agent ACP adapter gets the same setting
sources through ``_meta`` on every session/new and session/resume. Copilot CLI and the Codex
ACP adapter load a workspace's config whatever they are told, so they run only where the
operator allows it.

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
from tests.e2e.providers import acp_claude, acp_codex
from tests.e2e.test_hostile_workspaces import CONTEXT_MARKER, plant_claude, plant_codex, touch
from tests.gateway import GatewayProcess
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
    """False: the gateway knows no way to keep the agent from it, so the agent runs only
    where the operator allows the workspace's config (``loads_workspace_config``)."""
    untrusting: bool = False
    """Refuses its privileged modes in a folder it does not trust (``untrusted_refuses``)."""


AGENTS = {
    # Gemini CLI 0.61 runs no SessionStart hook in ACP mode.
    "acp:gemini": Agent(
        directory=".gemini",
        events=("BeforeAgent",),
        leaves=frozenset({"mcp", "BeforeAgent"}),
        context_file="GEMINI.md",
        untrusting=True,
    ),
    # Qwen Code 0.24.4 starts a workspace's stdio MCP server only once it is approved.
    "acp:qwen": Agent(
        directory=".qwen",
        events=("SessionStart", "UserPromptSubmit", "Stop"),
        leaves=frozenset({"SessionStart", "UserPromptSubmit", "Stop"}),
        untrusting=True,
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


SWITCHED = sorted(name for name, agent in AGENTS.items() if agent.switch)
UNTRUSTING = sorted(name for name, agent in AGENTS.items() if agent.untrusting)


@pytest.mark.parametrize("provider", SWITCHED)
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


@pytest.mark.parametrize("provider", UNTRUSTING)
def test_acp_privileged_modes_are_refused_at_creation_while_the_workspace_is_untrusted(
    make_gateway: GatewayFactory, workspace: Path, markers: Path, provider: str
) -> None:
    every_mode = {"allowed_approval_modes": ["ask", "auto_edits", "allow_all", "read_only"]}
    gateway = make_gateway(provider, sandbox=writable(markers), sessions=every_mode).start()
    with gateway.client() as client:
        refused = [
            client.post("/v1/sessions", json={"workspace": str(workspace), "approval_mode": mode})
            for mode in ("auto_edits", "allow_all")
        ]
        listed = client.get("/v1/sessions").json()
        ask = create_session(client, workspace, approval_mode="ask")

    for response in refused:
        assert response.status_code == 422, response.text
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["type"].endswith("approval_mode_refused")
        assert f'providers."{provider}".project_config = true' in problem["detail"]
    assert listed["sessions"] == []  # nothing stored
    assert ask.startswith("ses_")


@pytest.mark.parametrize("provider", UNTRUSTING)
def test_acp_privileged_modes_run_once_the_operator_allows_the_workspace_config(
    make_gateway: GatewayFactory, stub: StubLLM, workspace: Path, markers: Path, provider: str
) -> None:
    """The companion: the mode the 422 above refuses is one the agent runs in a trusted
    folder, so the refusal is the workspace's trust, not the mode."""
    allowed = {provider: {"project_config": True}}
    gateway = make_gateway(provider, sandbox=writable(markers), **allowed).start()
    with gateway.client() as client:
        session_id = create_session(client, workspace, approval_mode="auto_edits")
        events = run_turn(client, session_id, "hello")

    assert events[-1]["type"] == "turn.completed", kinds(events)


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


def adapter_gateway(
    make_gateway: GatewayFactory,
    stub: StubLLM,
    home: Path,
    provider: str,
    markers: Path,
    **section: Any,
) -> GatewayProcess:
    """A gateway whose one provider is an ACP adapter (``acp:claude`` or ``acp:codex``)."""
    gateway = make_gateway(sandbox=writable(markers))
    gateway.config["providers"]["claude_code"] = {"enabled": False}
    wiring = acp_claude if provider == "acp:claude" else acp_codex
    gateway.config["providers"][provider] = {**wiring(stub, home), **section}
    gateway.config["selection"]["default"] = provider
    return gateway.start()


CLAUDE_MARKS = {"mcp", "settings.json-SessionStart", "settings.local.json-UserPromptSubmit"}


def test_claude_adapter_leaves_the_workspace_config_out_on_new_and_resumed_threads(
    make_gateway: GatewayFactory, stub: StubLLM, workspace: Path, markers: Path, tmp_path: Path
) -> None:
    plant_claude(workspace, markers)
    gateway = adapter_gateway(make_gateway, stub, tmp_path / "home", "acp:claude", markers)
    with gateway.client() as client:
        session_id = create_session(client, workspace, approval_mode="ask")
        first = run_turn(client, session_id, "hello")
    gateway.stop()  # the next turn resumes the thread in a new adapter process
    gateway.start()
    with gateway.client() as client:
        second = run_turn(client, session_id, "hello again")

    assert [first[-1]["type"], second[-1]["type"]] == ["turn.completed"] * 2, kinds(second)
    assert "session.thread_bound" not in kinds(second)  # the same thread, resumed
    assert marks(markers) == []  # no hook, no MCP server, on either thread start
    assert CONTEXT_MARKER not in model_request_text(stub)  # no CLAUDE.md


ADAPTERS_ALLOWED = {
    # Every planted hook and server, and CLAUDE.md in the prompt.
    "acp:claude": (plant_claude, CLAUDE_MARKS, True),
    # What the refusal below stands on for the Codex adapter: it starts the workspace's MCP
    # server (Copilot's hooks run in test_acp_workspace_config_loads_when_the_operator_allows_it).
    "acp:codex": (plant_codex, {"mcp"}, False),
}


@pytest.mark.parametrize("provider", sorted(ADAPTERS_ALLOWED))
def test_an_adapter_loads_the_workspace_config_when_the_operator_allows_it(
    make_gateway: GatewayFactory,
    stub: StubLLM,
    workspace: Path,
    markers: Path,
    tmp_path: Path,
    provider: str,
) -> None:
    plant, expected, context = ADAPTERS_ALLOWED[provider]
    plant(workspace, markers)
    home = tmp_path / "home"
    gateway = adapter_gateway(make_gateway, stub, home, provider, markers, project_config=True)
    with gateway.client() as client:
        session_id = create_session(client, workspace, approval_mode="ask")
        events = run_turn(client, session_id, "hello")

    assert events[-1]["type"] == "turn.completed", kinds(events)
    assert set(wait_for_marks(markers, expected)) >= expected
    if context:
        assert CONTEXT_MARKER in model_request_text(stub)


@pytest.mark.parametrize("provider", ["acp:codex", "acp:copilot"])
def test_an_agent_without_a_switch_is_unavailable_until_the_operator_allows_the_config(
    make_gateway: GatewayFactory,
    stub: StubLLM,
    workspace: Path,
    markers: Path,
    tmp_path: Path,
    provider: str,
) -> None:
    if provider == "acp:codex":
        plant_codex(workspace, markers)
        gateway = adapter_gateway(make_gateway, stub, tmp_path / "home", provider, markers)
    else:
        agent = AGENTS[provider]
        agent.plant(agent, workspace, markers)
        off = {provider: {"project_config": False}}  # the suite's wiring allows it
        gateway = make_gateway(provider, sandbox=writable(markers), **off).start()
    with gateway.client() as client:
        listed = client.get("/v1/providers").json()
        created = client.post(
            "/v1/sessions", json={"workspace": str(workspace), "provider": provider}
        )

    health = next(p for p in listed["providers"] if p["name"] == provider)["health"]
    assert health["available"] is False
    assert f'providers."{provider}".project_config = true' in health["reason"]
    assert created.status_code == 503, created.text
    assert created.headers["content-type"] == "application/problem+json"
    assert "project_config" in created.text
    assert marks(markers) == []  # no agent process started

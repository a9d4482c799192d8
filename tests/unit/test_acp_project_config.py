"""``providers.<name>.project_config`` for ACP agents: the recipe's switch, set over the
operator's ``env`` and ``config``."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from app.process.runner import ProcessRunner
from app.providers.acp import agents
from app.providers.acp.agents import BUILTIN, ProjectConfigSwitch, SettingsLayer
from app.providers.acp.provider import AcpProvider
from app.providers.descriptor import BuildContext
from app.providers.opencode.config import NO_PROJECT_CONFIG_ENV
from app.providers.sandboxing import Sandbox, SandboxStatus
from app.settings import ProviderSettings, RetrySettings

PARENT = {"PATH": "/usr/bin", "SECRET": "no"}


def provider(name: str, **settings: object) -> AcpProvider:
    return AcpProvider(
        BuildContext(
            name=name,
            settings=ProviderSettings.model_validate(settings),
            executable="agent",
            runner=ProcessRunner(),
            parent_env=PARENT,
            retry=RetrySettings(),
        )
    )


def test_gemini_never_trusts_the_workspace_unless_the_operator_allows_it() -> None:
    env = provider("acp:gemini", env={"GEMINI_CLI_TRUST_WORKSPACE": "true"}).child_env("ask")

    assert env["GEMINI_CLI_TRUST_WORKSPACE"] == "false"


def test_gemini_trusts_the_workspace_when_the_operator_allows_it() -> None:
    env = provider("acp:gemini", project_config=True).child_env("ask")

    assert env["GEMINI_CLI_TRUST_WORKSPACE"] == "true"


def test_opencode_acp_gets_the_native_providers_switches() -> None:
    off = provider("acp:opencode", env={"OPENCODE_DISABLE_PROJECT_CONFIG": "0"}).child_env("ask")
    on = provider("acp:opencode", project_config=True).child_env("ask")

    assert NO_PROJECT_CONFIG_ENV.items() <= off.items()
    assert not NO_PROJECT_CONFIG_ENV.keys() & on.keys()


@pytest.mark.parametrize("allowed", [False, True])
def test_a_settings_switch_is_layered_over_the_operators_config(
    monkeypatch: pytest.MonkeyPatch, allowed: bool
) -> None:
    switch = ProjectConfigSwitch(
        off_settings={"security": {"trust": False}}, on_settings={"security": {"trust": True}}
    )
    recipe = dataclasses.replace(
        BUILTIN["gemini"],
        settings=SettingsLayer(variable="SETTINGS", content={"general": {"a": 1}}),
        project_config=switch,
    )
    monkeypatch.setattr(agents, "BUILTIN", {**BUILTIN, "gemini": recipe})
    host = provider(
        "acp:gemini",
        project_config=allowed,
        config={"security": {"trust": not allowed, "other": 2}},
    )
    try:
        env = host.child_env("ask")
        content = json.loads(Path(env["SETTINGS"]).read_text())
    finally:
        asyncio.run(host.aclose())  # removes the settings file

    assert content == {"general": {"a": 1}, "security": {"trust": allowed, "other": 2}}


@pytest.mark.parametrize("member", sorted(BUILTIN))
def test_every_switch_turns_something_off(member: str) -> None:
    switch = BUILTIN[member].project_config
    if switch is not None:
        assert switch.off_env or switch.off_settings or switch.off_meta or switch.off_args


@pytest.mark.parametrize("member", sorted(BUILTIN))
def test_no_agent_both_has_a_switch_and_is_said_to_have_none(member: str) -> None:
    recipe = BUILTIN[member]
    assert recipe.project_config is None or recipe.loads_workspace_config is None


def test_the_claude_adapter_gets_the_user_settings_alone_and_no_workspace_mcp() -> None:
    off = provider("acp:claude").session_meta()
    on = provider("acp:claude", project_config=True).session_meta()

    assert off == {"claudeCode": {"options": {"settingSources": ["user"], "strictMcpConfig": True}}}
    assert on == {}  # the adapter's own: user, project and local


@pytest.mark.parametrize("name", ["acp:codex", "acp:copilot"])
def test_an_agent_that_loads_the_workspace_config_anyway_runs_only_once_allowed(
    name: str,
) -> None:
    refused = provider(name).workspace_config_refusal()
    allowed = provider(name, project_config=True).workspace_config_refusal()

    assert refused is not None
    assert f'providers."{name}".project_config = true' in refused
    assert allowed is None
    assert provider("acp:gemini").workspace_config_refusal() is None


def test_qwen_trusts_no_folder_unless_the_operator_allows_it() -> None:
    host = provider("acp:qwen")
    try:
        env = host.child_env("ask")
        settings = json.loads(Path(env["QWEN_CODE_SYSTEM_SETTINGS_PATH"]).read_text())
        trusted = json.loads(Path(env["QWEN_CODE_TRUSTED_FOLDERS_PATH"]).read_text())
    finally:
        asyncio.run(host.aclose())

    assert settings["security"] == {"folderTrust": {"enabled": True}}
    assert trusted == {}


def test_qwen_trusts_every_folder_when_the_operator_allows_it() -> None:
    host = provider("acp:qwen", project_config=True)
    try:
        env = host.child_env("ask")
        settings = json.loads(Path(env["QWEN_CODE_SYSTEM_SETTINGS_PATH"]).read_text())
    finally:
        asyncio.run(host.aclose())

    assert settings["security"] == {"folderTrust": {"enabled": False}}
    assert "QWEN_CODE_TRUSTED_FOLDERS_PATH" not in env


@pytest.mark.parametrize("member", ["gemini", "qwen"])
def test_an_untrusting_agent_refuses_its_privileged_modes_at_creation(member: str) -> None:
    off, on = provider(f"acp:{member}"), provider(f"acp:{member}", project_config=True)

    for mode in ("auto_edits", "allow_all"):
        why = off.refuses(mode)
        assert why is not None
        assert "use 'ask' or 'read_only'" in why
        assert f'providers."acp:{member}".project_config = true' in why
        assert on.refuses(mode) is None
    assert off.refuses("ask") is None
    assert off.refuses("read_only") is None
    assert provider("acp:copilot").refuses("allow_all") is None


def test_codebuddy_loads_only_the_users_settings_and_no_mcp_json_unless_allowed() -> None:
    off = provider("acp:codebuddy", extra_args=["--verbose"]).argv
    on = provider("acp:codebuddy", project_config=True).argv

    assert off == (
        "agent",
        "--acp",
        "--setting-sources",
        "user",
        "--strict-mcp-config",
        "--verbose",
    )
    assert on == ("agent", "--acp")


def test_a_sandboxed_claude_adapter_gets_the_login_from_the_operators_settings(
    tmp_path: Path,
) -> None:
    """As the native provider: the key the container keeps in settings.json, and only it."""
    config = tmp_path / "claude"
    config.mkdir()
    settings = {"env": {"ANTHROPIC_API_KEY": "sk-from-settings", "OTHER": "x"}}
    (config / "settings.json").write_text(json.dumps(settings))

    def adapter(sandbox: Sandbox) -> AcpProvider:
        return AcpProvider(
            BuildContext(
                name="acp:claude",
                settings=ProviderSettings(env={"CLAUDE_CONFIG_DIR": str(config)}),
                executable="claude-agent-acp",
                runner=ProcessRunner(),
                parent_env=PARENT,
                retry=RetrySettings(),
                sandbox=sandbox,
            )
        )

    on = adapter(Sandbox(status=SandboxStatus(mode="bwrap", reason="test"))).child_env("ask")
    off = adapter(Sandbox(status=SandboxStatus(mode="none", reason="test"))).child_env("ask")

    assert on["ANTHROPIC_API_KEY"] == "sk-from-settings"
    assert "OTHER" not in on
    assert "ANTHROPIC_API_KEY" not in off  # the adapter's Claude Code reads its settings itself

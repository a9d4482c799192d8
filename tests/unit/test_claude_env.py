"""The Claude Code child environment: fixed knobs, the gateway's retry budget, the env overlay."""

from __future__ import annotations

import json
from pathlib import Path

from app.process.runner import ProcessRunner
from app.providers.claude.provider import FIXED_ENV, ClaudeCodeProvider
from app.providers.descriptor import BuildContext
from app.providers.sandboxing import Sandbox, SandboxStatus, settings_credentials
from app.settings import ProviderSettings, RetrySettings

PARENT = {"PATH": "/usr/bin", "ANTHROPIC_API_KEY": "sk-x", "SECRET": "no"}


def provider(
    env: dict[str, str] | None = None, retry: RetrySettings | None = None
) -> ClaudeCodeProvider:
    return ClaudeCodeProvider(
        BuildContext(
            name="claude_code",
            settings=ProviderSettings(env=env or {}),
            executable="claude",
            runner=ProcessRunner(),
            parent_env=PARENT,
            retry=retry or RetrySettings(),
        )
    )


def test_the_retry_budget_defaults_to_the_gateway_setting(tmp_path: Path) -> None:
    env = provider().child_env(tmp_path)

    assert env["CLAUDE_CODE_MAX_RETRIES"] == str(RetrySettings().cli_request_retries) == "2"
    assert env["PWD"] == str(tmp_path)
    assert env["ANTHROPIC_API_KEY"] == "sk-x"
    assert "SECRET" not in env
    assert FIXED_ENV.items() <= env.items()


def test_the_retry_budget_follows_retry_cli_request_retries(tmp_path: Path) -> None:
    env = provider(retry=RetrySettings(cli_request_retries=7)).child_env(tmp_path)

    assert env["CLAUDE_CODE_MAX_RETRIES"] == "7"


def test_the_provider_env_overlay_still_wins(tmp_path: Path) -> None:
    retry = RetrySettings(cli_request_retries=7)
    env = provider({"CLAUDE_CODE_MAX_RETRIES": "0"}, retry).child_env(tmp_path)

    assert env["CLAUDE_CODE_MAX_RETRIES"] == "0"


def test_a_parent_variable_does_not_leak_past_the_setting(tmp_path: Path) -> None:
    parent = {**PARENT, "CLAUDE_CODE_MAX_RETRIES": "10"}
    claude = ClaudeCodeProvider(
        BuildContext(
            name="claude_code",
            settings=ProviderSettings(),
            executable="claude",
            runner=ProcessRunner(),
            parent_env=parent,
        )
    )

    assert claude.child_env(tmp_path)["CLAUDE_CODE_MAX_RETRIES"] == "2"


def sandboxed(env: dict[str, str]) -> ClaudeCodeProvider:
    return ClaudeCodeProvider(
        BuildContext(
            name="claude_code",
            settings=ProviderSettings(env=env),
            executable="claude",
            runner=ProcessRunner(),
            parent_env={"PATH": "/usr/bin"},
            sandbox=Sandbox(status=SandboxStatus(mode="bwrap", reason="test")),
        )
    )


def test_a_sandboxed_claude_gets_the_login_from_the_operators_settings_and_nothing_else(
    tmp_path: Path,
) -> None:
    """The container's entrypoint keeps the key in settings.json, which the session's own
    home does not have: the key (only) comes along in the environment."""
    config = tmp_path / "claude"
    config.mkdir()
    settings = {
        "env": {"ANTHROPIC_API_KEY": "sk-from-settings", "OTHER": "x"},
        "hooks": {"PreToolUse": []},
    }
    (config / "settings.json").write_text(json.dumps(settings))

    env = sandboxed({"CLAUDE_CONFIG_DIR": str(config)}).child_env(tmp_path)
    unsandboxed = provider({"CLAUDE_CONFIG_DIR": str(config)}).child_env(tmp_path)
    overridden = sandboxed({"CLAUDE_CONFIG_DIR": str(config), "ANTHROPIC_API_KEY": "sk-own"})

    assert env["ANTHROPIC_API_KEY"] == "sk-from-settings"
    assert "OTHER" not in env
    assert unsandboxed["ANTHROPIC_API_KEY"] == "sk-x"  # Claude Code reads its settings itself
    assert overridden.child_env(tmp_path)["ANTHROPIC_API_KEY"] == "sk-own"
    assert settings_credentials({"HOME": str(tmp_path / "nobody")}) == {}

"""The provider catalog: one map that says which providers exist, resolved into the settings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from app.api.schemas import provider_name_schema
from app.process.runner import ProcessRunner
from app.providers import catalog
from app.providers.base import Provider
from app.providers.catalog import CATALOG, executable, resolve
from app.providers.factory import build_providers
from app.settings import ConfigError, Settings, load_settings


def resolved(**overrides: Any) -> Settings:
    return resolve(load_settings(workspaces={"roots": ["/"]}, **overrides))


def refusal(**overrides: Any) -> str:
    with pytest.raises(ConfigError) as raised:
        resolved(**overrides)
    return str(raised.value)


PROVIDERS = [name for name, d in CATALOG.items() if not d.family]
"""Every provider the catalog names (a family's built-in members included)."""
STANDALONE = ["claude_code", "codex", "opencode"]


def test_every_catalogued_provider_is_configured_with_its_defaults() -> None:
    settings = resolved(providers={"codex": {"model": "gpt-5"}})
    assert list(settings.providers) == STANDALONE  # a family's members only as configured
    assert {"acp:gemini", "acp:copilot", "acp:qwen", "acp:codebuddy"} <= set(PROVIDERS)
    gemini = resolved(providers={"acp:gemini": {"env": {"GEMINI_API_KEY": "k"}}})
    assert list(gemini.providers) == [*STANDALONE, "acp:gemini"]  # a recipe, no command
    assert settings.providers["codex"].model == "gpt-5"
    assert settings.providers["claude_code"].idle_timeout_s == 600.0
    assert settings.providers["claude_code"].enabled is True
    assert resolve(settings) == settings  # idempotent


def test_an_unknown_provider_is_refused_naming_the_known_ones() -> None:
    message = refusal(providers={"gemini": {"model": "gemini-3"}})
    assert "unknown provider 'gemini'" in message
    assert "claude_code, codex, opencode" in message


@pytest.mark.parametrize(
    "selection",
    [
        {"default": "gemini"},
        {"fallback_chain": ["claude_code", "aider"]},
        {"scenarios": {"code_analysis": ["gemini"]}},
    ],
)
def test_selection_naming_an_unknown_provider_is_refused(selection: dict[str, object]) -> None:
    message = refusal(selection=selection)
    assert "selection names provider" in message
    assert "known providers: claude_code, codex, opencode" in message


def test_every_descriptor_is_complete_and_its_cli_is_pinned() -> None:
    for name, descriptor in CATALOG.items():
        assert descriptor.name == name
        assert descriptor.credentials.hint
        assert bool(descriptor.command) != descriptor.family  # a family's come from settings
    assert set(catalog.pinned_versions()) == set(PROVIDERS)  # agents/package.json has each


def test_the_executable_is_the_configured_one_else_the_pinned_one_else_the_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / ".bin").mkdir()
    (tmp_path / ".bin" / "claude").touch()
    copilot = tmp_path / "@github" / "copilot-linux-x64" / "copilot"  # not .bin: the native one
    copilot.parent.mkdir(parents=True)
    copilot.touch()
    monkeypatch.setattr(catalog, "PINNED_MODULES", tmp_path)
    configured = resolved(providers={"claude_code": {"executable": "/usr/local/bin/claude"}})
    assert executable("claude_code", configured) == "/usr/local/bin/claude"
    assert executable("claude_code", resolved()) == str(tmp_path / ".bin" / "claude")
    assert executable("acp:copilot", resolved(providers={"acp:copilot": {}})) == str(copilot)
    own = resolved(providers={"acp:goose": {"command": ["/opt/goose", "acp"]}})
    assert executable("acp:goose", own) == "/opt/goose"
    monkeypatch.setattr(catalog, "PINNED_MODULES", tmp_path / "not-installed")
    assert executable("claude_code", resolved()) == "claude"
    assert executable("acp:copilot", resolved(providers={"acp:copilot": {}})) == "copilot"


def test_the_factory_builds_each_enabled_provider_from_its_descriptor() -> None:
    providers = {"opencode": {"enabled": False}, "acp:qwen": {}}
    settings = resolved(providers=providers, sandbox={"mode": "none"})
    built = build_providers(settings, ProcessRunner())
    assert set(built) == {"claude_code", "codex", "acp:qwen"}
    for name, provider in built.items():
        assert isinstance(provider, Provider)
        assert provider.capabilities == CATALOG[name].capabilities


def test_a_sandboxed_codex_runs_no_shared_process() -> None:
    """One server per session in the sandbox: it counts as the session's own process."""
    settings = resolved(providers={"opencode": {"enabled": False}}, sandbox={"mode": "bwrap"})
    built = build_providers(settings, ProcessRunner())
    assert CATALOG["codex"].capabilities.shared_process
    assert not built["codex"].capabilities.shared_process
    assert built["claude_code"].capabilities == CATALOG["claude_code"].capabilities


@pytest.mark.parametrize(
    ("name", "found"),
    [
        ("claude_code", "claude_code"),
        ("acp:gemini", "acp:gemini"),  # a built-in member has its own entry
        ("acp:qwen-code.v2", "acp"),  # any other member is driven by the family's
        ("acp", None),  # a family is not a provider itself
        ("acp:", None),
        ("claude_code:x", None),  # only a family has members
        ("gemini:x", None),
        ("gemini", None),
    ],
)
def test_a_name_is_described_by_its_own_entry_or_its_familys(name: str, found: str | None) -> None:
    described = catalog.descriptor(name)
    assert (described.name if described else None) == found


def test_an_operators_own_acp_agent_is_present_only_as_configured_with_its_command() -> None:
    settings = load_settings(
        workspaces={"roots": ["/"]},
        providers={"acp:goose": {"command": ["goose", "acp"], "model": "gpt-5"}},
        selection={"default": "acp:goose", "fallback_chain": ["claude_code"]},
    )
    providers = resolve(settings).providers
    assert list(providers) == [*STANDALONE, "acp:goose"]
    assert providers["acp:goose"].model == "gpt-5"
    commandless = refusal(providers={"acp:goose": {"model": "gpt-5"}})
    assert "providers.'acp:goose' needs command = [...]" in commandless
    assert "acp:gemini" in commandless  # and names the agents that need none
    named = settings.model_copy(update={"providers": {}})
    with pytest.raises(ConfigError) as unconfigured:  # a member must be configured to be named
        resolve(named)
    assert "selection names provider 'acp:goose'" in str(unconfigured.value)
    assert "acp:<name>" in str(unconfigured.value)


def test_command_is_only_for_acp_agents() -> None:
    message = refusal(providers={"claude_code": {"command": ["claude"]}})
    assert "providers.claude_code.command is only for acp:<name> agents" in message
    assert resolved(providers={"acp:gemini": {"command": ["gemini", "--acp", "--debug"]}})


def test_the_api_schema_of_a_provider_name_lists_names_and_family_members() -> None:
    schema = provider_name_schema()
    names, members = schema["anyOf"]
    assert names == {"enum": PROVIDERS}
    pattern = re.compile(members["pattern"])
    assert pattern.match("acp:goose")
    assert not pattern.match("acp:")
    assert not pattern.match("codex:gemini")
    closed = {n: d for n, d in CATALOG.items() if not d.family}
    assert provider_name_schema(closed) == {"type": "string", "enum": PROVIDERS}


def test_the_key_in_claude_codes_settings_is_a_secret_to_mask(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text('{"env": {"ANTHROPIC_API_KEY": "sk-in-settings"}}')
    settings = resolved(providers={"claude_code": {"env": {"CLAUDE_CONFIG_DIR": str(tmp_path)}}})

    assert "sk-in-settings" in catalog.cli_secrets(settings, {"PATH": "/usr/bin"})


def test_the_key_in_the_claude_adapters_settings_is_a_secret_to_mask(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text('{"env": {"ANTHROPIC_API_KEY": "sk-adapter"}}')
    section = {"command": ["claude-agent-acp"], "env": {"CLAUDE_CONFIG_DIR": str(tmp_path)}}
    settings = resolved(providers={"claude_code": {"enabled": False}, "acp:claude": section})

    assert "sk-adapter" in catalog.cli_secrets(settings, {"PATH": "/usr/bin"})

"""The provider catalog: one map that says which providers exist, resolved into the settings."""

from __future__ import annotations

import re
from dataclasses import replace
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


def test_every_catalogued_provider_is_configured_with_its_defaults() -> None:
    settings = resolved(providers={"codex": {"model": "gpt-5"}})
    assert list(settings.providers) == ["claude_code", "codex", "opencode"]
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
        assert descriptor.command
        assert descriptor.credentials.hint
    assert set(catalog.pinned_versions()) == set(CATALOG)  # agents/package.json has each


def test_the_executable_is_the_configured_one_else_the_pinned_one_else_the_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "claude").touch()
    monkeypatch.setattr(catalog, "PINNED_CLI_BIN", tmp_path)
    configured = resolved(providers={"claude_code": {"executable": "/usr/local/bin/claude"}})
    assert executable("claude_code", configured) == "/usr/local/bin/claude"
    assert executable("claude_code", resolved()) == str(tmp_path / "claude")
    monkeypatch.setattr(catalog, "PINNED_CLI_BIN", tmp_path / "not-installed")
    assert executable("claude_code", resolved()) == "claude"


def test_the_factory_builds_each_enabled_provider_from_its_descriptor() -> None:
    settings = resolved(providers={"opencode": {"enabled": False}})
    built = build_providers(settings, ProcessRunner())
    assert set(built) == {"claude_code", "codex"}
    for name, provider in built.items():
        assert isinstance(provider, Provider)
        assert provider.capabilities == CATALOG[name].capabilities


# A catalog with a family, as one driving every Agent Client Protocol agent alike would be.
FAMILY = {**CATALOG, "acp": replace(CATALOG["opencode"], name="acp", family=True)}


@pytest.mark.parametrize(
    ("name", "found"),
    [
        ("claude_code", "claude_code"),
        ("acp:gemini", "acp"),
        ("acp:qwen-code.v2", "acp"),
        ("acp", None),  # a family is not a provider itself
        ("acp:", None),
        ("claude_code:x", None),  # only a family has members
        ("gemini:x", None),
        ("gemini", None),
    ],
)
def test_a_name_is_described_by_its_own_entry_or_its_familys(name: str, found: str | None) -> None:
    described = catalog.descriptor(name, FAMILY)
    assert (described.name if described else None) == found


def test_a_familys_members_are_present_only_as_configured() -> None:
    settings = load_settings(
        workspaces={"roots": ["/"]},
        providers={"acp:gemini": {"executable": "gemini", "model": "gemini-3"}},
        selection={"default": "acp:gemini", "fallback_chain": ["claude_code"]},
    )
    providers = resolve(settings, FAMILY).providers
    assert list(providers) == ["claude_code", "codex", "opencode", "acp:gemini"]
    assert providers["acp:gemini"].model == "gemini-3"
    with pytest.raises(ConfigError) as refused:  # this gateway's catalog has no such family
        resolve(settings)
    assert "unknown provider 'acp:gemini'" in str(refused.value)
    named = settings.model_copy(update={"providers": {}})
    with pytest.raises(ConfigError) as unconfigured:  # a member must be configured to be named
        resolve(named, FAMILY)
    assert "selection names provider 'acp:gemini'" in str(unconfigured.value)
    assert "claude_code, codex, opencode, acp:<name>" in str(unconfigured.value)


def test_the_api_schema_of_a_provider_name_lists_names_and_family_members() -> None:
    assert provider_name_schema() == {"type": "string", "enum": list(CATALOG)}
    schema = provider_name_schema(FAMILY)
    names, members = schema["anyOf"]
    assert names == {"enum": list(CATALOG)}
    pattern = re.compile(members["pattern"])
    assert pattern.match("acp:gemini")
    assert not pattern.match("acp:")
    assert not pattern.match("codex:gemini")

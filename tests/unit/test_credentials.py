"""The credential detector (app/providers/credentials.py) over real homes and environments:
each form a CLI reads is found where that CLI looks (sandboxed too), the variables a provider
is not given are not counted, and no message ever holds a value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.providers.catalog import described
from app.providers.credentials import Credential, cli_environment, endpoints, find_credential
from app.providers.sandboxing import LoginFiles, Sandbox, SandboxStatus
from app.settings import ProviderSettings
from tests.unit.entrypoint_box import CREDENTIALS

SECRET = "sk-secret-value-never-shown-0123456789"


def find(name: str, parent: dict[str, str], **section: object) -> Credential:
    return find_credential(name, ProviderSettings.model_validate(section), parent)


def said(credential: Credential) -> str:
    return f"{credential.where} {credential.fix} {credential.problem}"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An operator's home with nothing in it."""
    path = tmp_path / "home"
    path.mkdir()
    return path


def test_nothing_found_needs_a_login_and_says_where_it_looked_and_how(home: Path) -> None:
    found = find("claude_code", {"HOME": str(home), "PATH": "/usr/bin"})
    assert (found.found, found.form, found.checked) == (False, None, True)
    assert found.problem is not None
    assert "`claude auth login`" in found.problem
    assert "providers.claude_code.env.ANTHROPIC_API_KEY" in found.problem
    assert str(home / ".claude" / ".credentials.json") in found.where
    assert "ANTHROPIC_API_KEY" in found.where


def test_a_key_in_the_providers_env_or_passed_through_counts_and_is_never_shown(
    home: Path,
) -> None:
    own = find("claude_code", {"HOME": str(home)}, env={"ANTHROPIC_API_KEY": SECRET})
    assert (own.found, own.form) == (True, "variable")
    assert own.where == "ANTHROPIC_API_KEY in providers.claude_code.env"
    passed = find("codex", {"HOME": str(home), "OPENAI_API_KEY": SECRET})
    assert (passed.found, passed.form) == (True, "variable")
    assert passed.where == "OPENAI_API_KEY in the gateway's environment"
    assert passed.problem is None
    for credential in (own, passed):
        assert SECRET not in said(credential)


def test_an_empty_variable_is_no_credential(home: Path) -> None:
    found = find("claude_code", {"HOME": str(home), "ANTHROPIC_API_KEY": ""})
    assert not found.found


def test_a_key_the_provider_is_not_given_does_not_count_and_the_fix_says_so(home: Path) -> None:
    # Copilot gets COPILOT_GITHUB_TOKEN from the gateway's environment, never
    # COPILOT_PROVIDER_API_KEY: that one must be in its own env.
    parent = {"HOME": str(home), "COPILOT_PROVIDER_API_KEY": SECRET}
    withheld = find("acp:copilot", parent)
    assert not withheld.found
    assert withheld.problem is not None
    assert "COPILOT_PROVIDER_API_KEY is set in the gateway's environment but not passed" in (
        withheld.problem
    )
    assert "providers.acp:copilot.env" in withheld.problem
    assert SECRET not in said(withheld)
    assert find("acp:copilot", {**parent, "GH_TOKEN": SECRET}).found
    # OpenCode is given only the keys of the model provider it is configured for.
    opencode = {"HOME": str(home), "OPENAI_API_KEY": SECRET}
    assert find("opencode", opencode, model="openai/gpt-5").found
    assert not find("opencode", opencode, model="anthropic/claude-sonnet-4-5").found


def test_a_login_file_under_home_counts_and_an_empty_one_does_not(home: Path) -> None:
    login = write(home / ".claude" / ".credentials.json", "")
    parent = {"HOME": str(home)}
    assert not find("claude_code", parent).found  # what a sandbox leaves in a session's home
    login.write_text(json.dumps({"claudeAiOauth": {"accessToken": SECRET}}))
    found = find("claude_code", parent)
    assert (found.found, found.form, found.where) == (True, "login_file", f"login file {login}")
    # The provider's own HOME is where its CLI looks, not the gateway's.
    elsewhere = home.parent / "elsewhere"
    elsewhere.mkdir()
    assert not find("claude_code", parent, env={"HOME": str(elsewhere)}).found


def test_a_login_file_in_a_moved_config_directory_counts(home: Path, tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-state"
    write(home / ".codex" / "auth.json", "{}")  # the default place, which CODEX_HOME moves
    moved = find("codex", {"HOME": str(home)}, env={"CODEX_HOME": str(codex_home)})
    assert not moved.found
    assert str(codex_home / "auth.json") in moved.where
    login = write(codex_home / "auth.json", json.dumps({"OPENAI_API_KEY": SECRET}))
    found = find("codex", {"HOME": str(home)}, env={"CODEX_HOME": str(codex_home)})
    assert (found.form, found.where) == ("login_file", f"login file {login}")
    xdg = tmp_path / "xdg-data"
    write(xdg / "opencode" / "auth.json", "{}")
    opencode = find("opencode", {"HOME": str(home), "XDG_DATA_HOME": str(xdg)})
    assert opencode.form == "login_file"


def test_the_claude_settings_file_env_counts_as_claude_code_and_its_adapter_read_it(
    home: Path,
) -> None:
    settings = write(home / ".claude" / "settings.json", "{}")
    assert not find("claude_code", {"HOME": str(home)}).found
    settings.write_text(json.dumps({"env": {"ANTHROPIC_API_KEY": SECRET, "OTHER": "x"}}))
    for name in ("claude_code", "acp:claude"):
        found = find(name, {"HOME": str(home)})
        assert (found.found, found.form) == (True, "settings")
        assert found.where == f"ANTHROPIC_API_KEY in the env of {settings}"
        assert SECRET not in said(found)


def test_what_the_container_entrypoint_writes_is_found_once_it_left_the_environment(
    home: Path, tmp_path: Path
) -> None:
    given = {
        "HOME": str(home),
        "GATEWAY_STORAGE__DATA_DIR": str(tmp_path / "data"),
        "ANTHROPIC_API_KEY": SECRET,
        "OPENAI_API_KEY": SECRET,
    }
    CREDENTIALS.run(given, require_token=False)
    parent = {"HOME": str(home)}  # the entrypoint removes the variables before serving
    forms = {name: find(name, parent).form for name in ("claude_code", "codex", "opencode")}
    assert forms == {"claude_code": "settings", "codex": "login_file", "opencode": "login_file"}


def test_a_custom_endpoint_or_a_configured_key_counts(home: Path) -> None:
    parent = {"HOME": str(home)}
    claude = find("claude_code", parent, env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:9/x"})
    assert (claude.form, claude.where) == (
        "endpoint",
        "a custom model endpoint (ANTHROPIC_BASE_URL)",
    )
    stub = {"base_url": "http://127.0.0.1:9/v1", "env_key": "STUB_API_KEY"}
    codex = find("codex", parent, config={"model_providers": {"stub": stub}})
    assert (codex.form, codex.where) == (
        "endpoint",
        "a custom model endpoint (providers.codex.config)",
    )
    # The Codex adapter takes its model provider in CODEX_CONFIG.
    adapter = find(
        "acp:codex", parent, env={"CODEX_CONFIG": json.dumps({"model_providers": {"s": stub}})}
    )
    assert (adapter.form, adapter.where) == ("endpoint", "a custom model endpoint (CODEX_CONFIG)")
    assert not find("acp:codex", parent, env={"CODEX_CONFIG": "not json"}).found
    keyed = {"provider": {"anthropic": {"options": {"apiKey": SECRET}}}}
    opencode = find("opencode", parent, config=keyed)
    assert (opencode.form, opencode.where) == (
        "config",
        "provider.anthropic.options.apiKey in providers.opencode.config",
    )
    # Settings that are no key and no endpoint do not count.
    assert not find("acp:qwen", parent, config={"memory": {"enableManagedAutoMemory": False}}).found


def test_endpoints_are_what_the_cli_is_pointed_at() -> None:
    settings = ProviderSettings(
        env={"OPENAI_BASE_URL": "http://127.0.0.1:8/v1"},
        config={"model_providers": {"stub": {"base_url": "http://127.0.0.1:9/v1"}}},
    )
    found = [(e.url, e.source) for e in endpoints("codex", settings, {})]
    assert found == [
        ("http://127.0.0.1:8/v1", "OPENAI_BASE_URL"),
        ("http://127.0.0.1:9/v1", "providers.codex.config"),
    ]
    # A variable of the gateway's own environment counts only when the CLI is given it.
    assert endpoints("codex", ProviderSettings(), {"OPENAI_BASE_URL": "http://x"}) != []
    assert endpoints("acp:codebuddy", ProviderSettings(), {"OPENAI_BASE_URL": "http://x"}) == []


def test_an_agent_whose_credentials_the_gateway_does_not_know_is_not_checked(home: Path) -> None:
    found = find("acp:goose", {"HOME": str(home)}, command=["goose", "acp"])
    assert (found.found, found.checked, found.form, found.problem) == (True, False, None, None)
    assert found.where.startswith("not checked")


@pytest.mark.parametrize("name", ["claude_code", "codex", "opencode", "acp:gemini", "acp:qwen"])
def test_the_login_file_found_is_the_one_a_sandboxed_session_is_shown(
    name: str, home: Path, tmp_path: Path
) -> None:
    credentials = described(name).credentials
    relative = credentials.login_files[0]
    write(home / relative, json.dumps({"token": SECRET}))
    settings = ProviderSettings()
    found = find_credential(name, settings, {"HOME": str(home)})
    assert found.form == "login_file"
    sandbox = Sandbox(
        status=SandboxStatus(mode="bwrap", reason="test"),
        homes_dir=tmp_path / "homes",
        login=LoginFiles(files=credentials.login_files, config_dirs=credentials.config_dirs),
    )
    env = cli_environment(name, settings, {"HOME": str(home), "PATH": "/usr/bin"})
    confinement, inside = sandbox.confine(
        session_id="ses_1", workspace=None, executable="sh", env=env
    )
    assert confinement is not None
    session_home = tmp_path / "homes" / "ses_1"
    assert inside["HOME"] == str(session_home)
    shown = {source: target for source, target in confinement.files}
    source = (home / relative).resolve()
    assert found.where == f"login file {home / relative}"
    assert shown[source] == session_home / relative


def test_a_credential_check_turned_off_counts_the_cli_as_logged_in(home: Path) -> None:
    # A Codex whose model provider lives in its own config.toml: the gateway cannot tell.
    found = find("codex", {"HOME": str(home)}, credential_check=False)
    assert (found.found, found.checked, found.form, found.problem) == (True, False, None, None)
    assert found.where == "not checked (providers.codex.credential_check = false)"
    assert not find("codex", {"HOME": str(home)}).found

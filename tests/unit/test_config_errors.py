"""What a configuration error says: where (file:line or variable), which setting, what was
expected, and for an unknown name the names that exist (app/configerrors.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from app.configerrors import key_lines
from app.settings import ConfigError, load_settings
from tests.unit.test_settings import clean_environment  # noqa: F401 - the same isolation, autouse


def refusal(tmp_path: Path, body: str) -> tuple[Path, list[str]]:
    """The file written from ``body`` and the lines of the error that refuses it."""
    path = tmp_path / "gateway.toml"
    path.write_text(textwrap.dedent(body).lstrip())
    with pytest.raises(ConfigError) as raised:
        load_settings(path)
    lines = str(raised.value).splitlines()
    assert lines[0] == f"invalid configuration in {path}:"
    return path, lines[1:]


def test_an_unknown_key_gets_its_line_the_close_names_and_their_variables(
    tmp_path: Path,
) -> None:
    path, said = refusal(
        tmp_path,
        """
        # the gateway
        [server]
        host = "127.0.0.1"
        prot = 9000
        """,
    )
    assert said == [
        f"  {path}:4: server.prot: no such setting; did you mean server.port "
        "(GATEWAY_SERVER__PORT)?"
    ]


def test_an_unknown_key_with_no_close_name_lists_the_sections_settings(tmp_path: Path) -> None:
    path, said = refusal(tmp_path, "[selection.weights]\nspeed = 2\n")
    assert said == [
        f"  {path}:2: selection.weights.speed: no such setting; the settings of "
        "[selection.weights] are cost, failure_rate, latency"
    ]


def test_an_unknown_section_is_matched_against_the_sections(tmp_path: Path) -> None:
    path, said = refusal(tmp_path, "log_level = 'info'\n\n[serverr]\nport = 9000\n")
    assert said == [
        f"  {path}:3: serverr: no such section or setting; did you mean [server] "
        "(GATEWAY_SERVER__<KEY>)?"
    ]


def test_keys_under_a_provider_and_dotted_keys_are_found(tmp_path: Path) -> None:
    path, said = refusal(
        tmp_path,
        """
        sandbox.mdoe = "none"

        [providers.claude_code]
        modle = "claude-sonnet-4-5"
        """,
    )
    assert sorted(said) == [
        f"  {path}:1: sandbox.mdoe: no such setting; did you mean sandbox.mode "
        "(GATEWAY_SANDBOX__MODE)?",
        f"  {path}:4: providers.claude_code.modle: no such setting; did you mean "
        "providers.claude_code.model (GATEWAY_PROVIDERS__CLAUDE_CODE__MODEL)?",
    ]


def test_a_bad_value_says_its_line_what_was_expected_and_its_variable(tmp_path: Path) -> None:
    path, said = refusal(
        tmp_path,
        """
        log_level = "verbose"
        [server]
        port = "eighty"
        """,
    )
    assert sorted(said) == [
        f"  {path}:1: log_level: should be 'debug', 'info', 'warning' or 'error' "
        "(or set GATEWAY_LOG_LEVEL)",
        f"  {path}:3: server.port: should be a valid integer, unable to parse string as an "
        "integer (or set GATEWAY_SERVER__PORT)",
    ]


def test_an_error_in_the_second_of_an_array_of_tables_names_its_line(tmp_path: Path) -> None:
    path, said = refusal(
        tmp_path,
        f"""
        [[server.api_keys]]
        name = "alice"
        token = "{"a" * 40}"

        [[server.api_keys]]
        name = "bob"
        token = "short"
        """,
    )
    assert said == [
        f"  {path}:7: server.api_keys[1].token: an API key token needs at least 32 characters "
        "(or set GATEWAY_SERVER__API_KEYS)"
    ]


def test_a_value_from_the_environment_is_named_by_its_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_SERVER__PORT", "70000")
    monkeypatch.setenv("GATEWAY_SERVER__HOTS", "127.0.0.2")
    # The file sets the port too; the variable overrides it, so the variable is named.
    _, said = refusal(tmp_path, "[server]\nport = 8000\n")
    assert sorted(said) == [
        "  GATEWAY_SERVER__HOTS: server.hots: no such setting; did you mean "
        "GATEWAY_SERVER__HOST (server.host)?",
        "  GATEWAY_SERVER__PORT: server.port: should be less than or equal to 65535",
    ]


def test_without_a_file_the_setting_and_its_variable_are_named() -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(server={"port": -1})
    assert str(raised.value).splitlines() == [
        "invalid configuration:",
        "  server.port: should be greater than or equal to 0 (or set GATEWAY_SERVER__PORT)",
    ]


def test_a_rule_across_sections_is_said_as_it_is(tmp_path: Path) -> None:
    _, said = refusal(
        tmp_path,
        """
        [sessions]
        default_approval_mode = "allow_all"
        """,
    )
    assert said == [
        "  sessions.default_approval_mode 'allow_all' must be one of "
        "sessions.allowed_approval_modes"
    ]


def test_key_lines_skip_multi_line_strings_and_arrays() -> None:
    text = textwrap.dedent(
        '''
        [retry]
        continuation_prompt = """
        not = "a key"
        """
        [workspaces]
        roots = [
          "/a",  # a = comment
          "/b",
        ]
        "quoted.key" = 1
        worktrees_root = "/w"
        [[server.api_keys]]
        name = "a"
        [[server.api_keys]]
        name = "b"
        '''
    ).lstrip()
    lines = key_lines(text)
    assert lines[("retry", "continuation_prompt")] == 2
    assert ("retry", "not") not in lines
    assert ("workspaces", "a") not in lines
    assert lines[("workspaces", "quoted.key")] == 10
    assert lines[("workspaces", "worktrees_root")] == 11
    assert lines[("server", "api_keys", 0, "name")] == 13
    assert lines[("server", "api_keys", 1, "name")] == 15
    assert lines[("server",)] == 12

"""The app-server command line and thread policies are pure functions of the settings."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

from app.events import APPROVAL_MODES, ApprovalMode
from app.process.runner import ProcessRunner
from app.providers.codex.argv import (
    DEFAULT_CONFIG,
    FORCED_CONFIG,
    RetryBudget,
    build_argv,
    config_overrides,
    thread_config,
    thread_policy,
    toml_value,
)
from app.providers.codex.provider import CodexProvider
from app.providers.descriptor import BuildContext
from app.settings import ProviderSettings, RetrySettings


def overrides(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == "-c"]


def parse(override: str) -> tuple[str, Any]:
    """Read an override the way Codex does: the key is a dotted path, the value TOML."""
    key, _, value = override.partition("=")
    return key, tomllib.loads(f"v = {value}")["v"]


def test_argv_runs_app_server_on_stdio_with_the_forced_overrides_last() -> None:
    argv = build_argv(executable="/bin/codex", config={})
    assert argv[:4] == ["/bin/codex", "app-server", "--listen", "stdio://"]
    assert [parse(o) for o in overrides(argv)] == [
        ("tools.update_plan.enabled", True),
        ("check_for_update_on_startup", False),
        ("features.plugins", False),
        ("analytics.enabled", False),
    ]


def test_nested_config_becomes_one_override_per_value() -> None:
    config: dict[str, JsonValue] = {
        "model_provider": "stub",
        "model_providers": {
            "stub": {"base_url": "http://127.0.0.1:1/v1", "request_max_retries": 0}
        },
        "features.web_search": True,
        "sandbox_workspace_write": {"writable_roots": ["/a", "/b"]},
        "shell_environment_policy": {"set": {}},
        "tools": {"limits": [{"name": "x", "max": 1.5}]},
    }
    parsed = dict(parse(o) for o in overrides(build_argv(executable="codex", config=config)))
    expected: dict[str, Any] = {
        "model_provider": "stub",
        "model_providers.stub.base_url": "http://127.0.0.1:1/v1",
        "model_providers.stub.request_max_retries": 0,
        "features.web_search": True,
        "sandbox_workspace_write.writable_roots": ["/a", "/b"],
        "shell_environment_policy.set": {},
        "tools.limits": [{"name": "x", "max": 1.5}],
        **DEFAULT_CONFIG,
        **FORCED_CONFIG,
    }
    assert parsed == expected


def test_operator_config_cannot_undo_the_forced_overrides() -> None:
    config: dict[str, JsonValue] = {
        "analytics": {"enabled": True},
        "features": {"plugins": True, "web_search": False},
        "check_for_update_on_startup": True,
    }
    pairs = config_overrides(config)
    assert [key for key, _ in pairs].count("features.plugins") == 1
    assert dict(pairs) == {
        "features.web_search": "false",
        "tools.update_plan.enabled": "true",
        "check_for_update_on_startup": "false",
        "features.plugins": "false",
        "analytics.enabled": "false",
    }


def test_the_plan_tool_is_on_unless_the_operator_turns_it_off() -> None:
    assert ("tools.update_plan.enabled", "true") in config_overrides({})
    off: dict[str, JsonValue] = {"tools": {"update_plan": {"enabled": False}}}
    assert dict(config_overrides(off))["tools.update_plan.enabled"] == "false"


def test_extra_args_come_last() -> None:
    argv = build_argv(executable="codex", config={}, extra_args=["--enable", "x"])
    assert argv[-2:] == ["--enable", "x"]


@pytest.mark.parametrize(
    "text",
    ["plain", 'quote " and \\ backslash', "line\nbreak\ttab", "bell \x07 del \x7f", "ünïcødé 🙂"],
)
def test_strings_survive_toml_encoding(text: str) -> None:
    assert tomllib.loads(f"v = {toml_value(text)}")["v"] == text


def test_table_keys_that_are_not_bare_are_quoted() -> None:
    encoded = toml_value({"a.b": 1, "plain_key-1": 2, "": 3})
    assert tomllib.loads(f"v = {encoded}")["v"] == {"a.b": 1, "plain_key-1": 2, "": 3}


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ({"a": None}, "a"),
        ({"a": {"b": float("inf")}}, "a.b"),
        ({"a": [1, None]}, "a[1]"),
    ],
)
def test_values_toml_cannot_hold_are_refused_with_their_key(
    config: dict[str, JsonValue], where: str
) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(where)):
        config_overrides(config)


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("ask", ("untrusted", "read-only")),
        ("auto_edits", ("untrusted", "workspace-write")),
        ("allow_all", ("never", "danger-full-access")),
        ("read_only", ("never", "read-only")),
    ],
)
def test_approval_modes_map_to_a_policy_and_sandbox(
    mode: ApprovalMode, expected: tuple[str, str]
) -> None:
    assert thread_policy(mode) == expected


STUB_PROVIDER: dict[str, JsonValue] = {
    "model_provider": "stub",
    "model_providers": {"stub": {"base_url": "http://127.0.0.1:1/v1", "wire_api": "responses"}},
}
BUDGET = RetryBudget(request_max_retries=2, stream_max_retries=3)


def test_retry_budget_is_set_on_the_selected_custom_provider() -> None:
    parsed = dict(
        parse(o)
        for o in overrides(build_argv(executable="codex", config=STUB_PROVIDER, retry=BUDGET))
    )

    assert parsed["model_providers.stub.request_max_retries"] == 2
    assert parsed["model_providers.stub.stream_max_retries"] == 3
    assert parsed["model_providers.stub.base_url"] == "http://127.0.0.1:1/v1"


def test_retry_budget_reaches_a_provider_written_with_dotted_keys() -> None:
    config: dict[str, JsonValue] = {
        "model_provider": "gw",
        "model_providers.gw.base_url": "http://127.0.0.1:1/v1",
    }
    pairs = dict(config_overrides(config, retry=BUDGET))

    assert pairs["model_providers.gw.request_max_retries"] == "2"
    assert pairs["model_providers.gw.stream_max_retries"] == "3"


def test_the_operators_own_retry_values_win() -> None:
    config: dict[str, JsonValue] = {
        "model_provider": "stub",
        "model_providers": {"stub": {"base_url": "http://x/v1", "request_max_retries": 0}},
    }
    pairs = config_overrides(config, retry=BUDGET)
    keys = [key for key, _ in pairs]

    assert keys.count("model_providers.stub.request_max_retries") == 1
    assert dict(pairs)["model_providers.stub.request_max_retries"] == "0"
    assert dict(pairs)["model_providers.stub.stream_max_retries"] == "3"


@pytest.mark.parametrize(
    "config",
    [
        {},  # the built-in OpenAI provider: Codex 0.169 has no knob for it
        {"model_provider": "openai"},
        # A provider defined only in the user's own config.toml (or a built-in like ollama):
        # a partial `model_providers.<id>` override could break or shadow it.
        {"model_provider": "mine"},
        # Defined but not selected.
        {"model_providers": {"other": {"base_url": "http://x/v1"}}},
    ],
)
def test_no_retry_keys_without_a_selected_custom_provider(config: dict[str, JsonValue]) -> None:
    keys = [key for key, _ in config_overrides(config, retry=BUDGET)]

    assert not [key for key in keys if "max_retries" in key]
    assert not [key for key in keys if key in ("request_max_retries", "stream_max_retries")]


def test_provider_passes_the_gateway_retry_settings(tmp_path: Any) -> None:
    settings = ProviderSettings(config=STUB_PROVIDER)
    retry = RetrySettings(cli_request_retries=1, cli_stream_retries=4)

    context = BuildContext(
        name="codex", settings=settings, executable="codex", runner=ProcessRunner(), parent_env={}
    )
    provider = CodexProvider(dataclasses.replace(context, retry=retry))
    default = CodexProvider(context)

    def budget(p: CodexProvider) -> dict[str, Any]:
        return {
            k: v for k, v in (parse(o) for o in overrides(list(p.server._argv))) if "retries" in k
        }

    assert budget(provider) == {
        "model_providers.stub.request_max_retries": 1,
        "model_providers.stub.stream_max_retries": 4,
    }
    assert budget(default) == {
        "model_providers.stub.request_max_retries": 2,
        "model_providers.stub.stream_max_retries": 2,
    }


def test_t7_thread_config_marks_the_workspace_and_every_ancestor_untrusted() -> None:
    config = thread_config(Path("/srv/a.b/project"))

    assert config == {
        "projects": {
            "/srv/a.b/project": {"trust_level": "untrusted"},
            "/srv/a.b": {"trust_level": "untrusted"},
            "/srv": {"trust_level": "untrusted"},
            "/": {"trust_level": "untrusted"},
        }
    }


def test_project_config_marks_the_workspace_and_every_ancestor_trusted_for_the_thread() -> None:
    config = thread_config(Path("/srv/project"), project_config=True)

    assert config == {
        "projects": {
            "/srv/project": {"trust_level": "trusted"},
            "/srv": {"trust_level": "trusted"},
            "/": {"trust_level": "trusted"},
        }
    }


def test_t7_no_mode_but_allow_all_runs_anything_unasked_or_unsandboxed() -> None:
    for mode in APPROVAL_MODES:
        policy, sandbox = thread_policy(mode)
        assert (sandbox == "danger-full-access") == (mode == "allow_all")
        assert policy in {"untrusted", "never"}

"""How the shared server is configured, and how approval modes and answers map to
OpenCode permissions (pure)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import JsonValue

from app.events import ApprovalMode
from app.providers.base import ApprovalAnswer
from app.providers.opencode.config import (
    FIXED_ENV,
    PASSTHROUGH_ENV,
    REQUIRED_CONFIG,
    build_argv,
    model_ref,
    passthrough_for,
    server_config,
    server_env,
)
from app.providers.opencode.permissions import (
    approval_request,
    permission_reply,
    permission_ruleset,
)


def evaluate(ruleset: list[dict[str, Any]], permission: str) -> str:
    """OpenCode's rule: the last matching rule wins; nothing matching falls back to the agent."""
    for rule in reversed(ruleset):
        if rule["permission"] in (permission, "*") and rule["pattern"] == "*":
            return str(rule["action"])
    return "agent default"


def test_the_server_listens_on_loopback_on_the_given_port() -> None:
    argv = build_argv(executable="/bin/opencode", port=4242, extra_args=["--log-level", "WARN"])
    assert argv == [
        "/bin/opencode", "serve", "--hostname", "127.0.0.1", "--port", "4242",
        "--log-level", "WARN",
    ]  # fmt: skip


def test_the_gateways_config_wins_and_the_operators_config_is_merged_under_it() -> None:
    operator: dict[str, JsonValue] = {
        "share": "auto",
        "model": "a/b",
        "provider": {"x": {"options": {"k": 1}}},
    }
    assert server_config(operator) == {**operator, **REQUIRED_CONFIG}
    assert server_config({}) == {"autoupdate": False, "share": "disabled"}


def test_the_environment_layers_the_knobs_config_and_password_over_the_operators() -> None:
    env = server_env(
        overlay={"HOME": "/h", "OPENCODE_DISABLE_AUTOUPDATE": "0", "OPENCODE_SERVER_PASSWORD": "x"},
        config={"model": "a/b"},
        password="secret",
    )
    assert env["HOME"] == "/h"
    assert {name: env[name] for name in FIXED_ENV} == dict(FIXED_ENV)
    assert env["OPENCODE_SERVER_PASSWORD"] == "secret"
    assert env["OPENCODE_SERVER_USERNAME"] == "opencode"
    assert json.loads(env["OPENCODE_CONFIG_CONTENT"]) == {
        "model": "a/b",
        "autoupdate": False,
        "share": "disabled",
    }


def test_t7_the_workspace_config_and_skills_are_switched_off_whatever_the_operator_says() -> None:
    env = server_env(
        overlay={"OPENCODE_DISABLE_PROJECT_CONFIG": "", "OPENCODE_DISABLE_EXTERNAL_SKILLS": "0"},
        config={},
        password="secret",
    )
    assert env["OPENCODE_DISABLE_PROJECT_CONFIG"] == "1"
    assert env["OPENCODE_DISABLE_EXTERNAL_SKILLS"] == "1"
    # This one would make `serve` proxy unknown paths to app.opencode.ai.
    assert "OPENCODE_DISABLE_EMBEDDED_WEB_UI" not in env


def test_t15_the_password_travels_in_the_environment_not_on_the_command_line() -> None:
    argv = build_argv(executable="/bin/opencode", port=4242)
    env = server_env(overlay={}, config={}, password="pw-123")
    assert env["OPENCODE_SERVER_PASSWORD"] == "pw-123"
    assert not any("pw-123" in arg for arg in argv)
    assert argv[argv.index("--hostname") + 1] == "127.0.0.1"


@pytest.mark.parametrize(
    ("model", "ref"),
    [
        (
            "anthropic/claude-sonnet-4-5",
            {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"},
        ),
        ("openrouter/meta/llama-4", {"providerID": "openrouter", "modelID": "meta/llama-4"}),
        ("gpt-5", None),
        ("/x", None),
        ("x/", None),
        ("", None),
        (None, None),
    ],
)
def test_a_model_is_sent_as_provider_and_model_id(
    model: str | None, ref: dict[str, str] | None
) -> None:
    assert model_ref(model) == ref


@pytest.mark.parametrize(
    ("mode", "bash", "edit", "webfetch", "read"),
    [
        ("ask", "ask", "ask", "ask", "agent default"),
        ("auto_edits", "ask", "allow", "ask", "agent default"),
        ("allow_all", "allow", "allow", "allow", "allow"),
        ("read_only", "deny", "deny", "deny", "agent default"),
    ],
)
def test_each_approval_mode_becomes_a_session_ruleset(
    mode: ApprovalMode, bash: str, edit: str, webfetch: str, read: str
) -> None:
    ruleset = permission_ruleset(mode)
    assert [evaluate(ruleset, p) for p in ("bash", "edit", "webfetch", "read")] == [
        bash,
        edit,
        webfetch,
        read,
    ]
    # Questions go to the client in every mode (never answered by the policy); plan mode
    # switches ask through OpenCode's own UI, which the gateway does not relay.
    assert evaluate(ruleset, "question") == "allow"
    assert evaluate(ruleset, "plan_enter") == "deny"


@pytest.mark.parametrize(
    ("answer", "body"),
    [
        (ApprovalAnswer(decision="allow"), {"reply": "once"}),
        (ApprovalAnswer(decision="allow_session"), {"reply": "always"}),
        (ApprovalAnswer(decision="deny"), {"reply": "reject"}),
        (ApprovalAnswer(decision="deny", message="no"), {"reply": "reject", "message": "no"}),
        (
            ApprovalAnswer(decision="allow", message="ignored", updated_input={"command": "ls"}),
            {"reply": "once"},
        ),
    ],
)
def test_answers_become_permission_replies(answer: ApprovalAnswer, body: dict[str, str]) -> None:
    assert permission_reply(answer) == body


def test_a_permission_request_without_always_patterns_offers_no_session_allow() -> None:
    request = approval_request(
        {
            "id": "per_1",
            "permission": "edit",
            "patterns": ["src/a.py"],
            "metadata": {"filepath": "src/a.py", "diff": "+x"},
            "always": [],
        }
    )
    assert request is not None
    assert request.options == ("allow", "deny")
    assert request.input == {"filepath": "src/a.py", "diff": "+x", "patterns": ["src/a.py"]}
    assert request.tool_id is None
    assert approval_request({"permission": "edit"}) is None


def test_only_the_credentials_of_the_configured_model_providers_are_passed() -> None:
    assert passthrough_for("anthropic/claude-sonnet-4-5", {}) == ("ANTHROPIC_API_KEY",)
    bedrock = passthrough_for(None, {"model": "amazon-bedrock/anthropic.claude-v2"})
    assert "AWS_SECRET_ACCESS_KEY" in bedrock
    assert "ANTHROPIC_API_KEY" not in bedrock
    both = passthrough_for("openai/gpt-5", {"small_model": "google/gemini-2.5-flash"})
    assert set(both) == {"OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY"}
    # A provider of the config's own (an endpoint with its key in the config) needs none.
    assert passthrough_for("stub/stub-model", {"provider": {"stub": {}}}) == ()


def test_with_no_provider_or_an_unknown_one_every_credential_is_passed() -> None:
    assert passthrough_for(None, {}) == PASSTHROUGH_ENV
    assert passthrough_for("gpt-5", {}) == PASSTHROUGH_ENV  # a bare name names no provider
    assert passthrough_for("azure/gpt-5", {}) == PASSTHROUGH_ENV  # which one it reads: unknown


def test_project_config_leaves_the_workspace_config_and_skills_to_opencode() -> None:
    env = server_env(overlay={}, config={}, password="secret", project_config=True)

    assert "OPENCODE_DISABLE_PROJECT_CONFIG" not in env
    assert "OPENCODE_DISABLE_EXTERNAL_SKILLS" not in env
    assert FIXED_ENV.items() <= env.items()

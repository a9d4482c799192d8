"""How the end-to-end tests point each real CLI at the stub LLM (gateway configuration).

Each function returns the ``providers.<name>`` section for a gateway whose CLI must talk only
to ``stub`` on loopback, with its state (HOME, config dirs) under ``home``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.stub_llm import StubLLM


def claude_code(stub: StubLLM, home: Path) -> dict[str, Any]:
    return {
        "turn_idle_timeout_s": 60,
        "env": {
            "ANTHROPIC_BASE_URL": stub.base_url,
            "ANTHROPIC_API_KEY": "stub-key",
            "HOME": str(home),
            "CLAUDE_CODE_MAX_RETRIES": "0",
        },
    }


def stub_model_provider(stub: StubLLM) -> dict[str, Any]:
    """Codex's ``model_providers.stub``: the stub's Responses API, no retries (Codex retries
    silently otherwise: a failing case would take ~25 s)."""
    return {
        "name": "Stub",
        "base_url": stub.openai_base_url,
        "env_key": "STUB_API_KEY",
        "wire_api": "responses",
        "request_max_retries": 0,
        "stream_max_retries": 0,
    }


def codex(stub: StubLLM, home: Path) -> dict[str, Any]:
    codex_home = home / "codex"
    codex_home.mkdir(exist_ok=True)  # Codex 0.169 refuses to start on a missing CODEX_HOME
    return {
        "model": "gpt-5.5",  # a model Codex knows: no "model metadata not found" warning
        "turn_idle_timeout_s": 60,
        "env": {"CODEX_HOME": str(codex_home), "HOME": str(home), "STUB_API_KEY": "stub-key"},
        # Layered over (never written into) $CODEX_HOME/config.toml as `-c` overrides.
        "config": {
            "model_provider": "stub",
            "model_providers": {"stub": stub_model_provider(stub)},
        },
    }


XDG_KINDS = ("config", "data", "cache", "state")


def opencode(stub: StubLLM, home: Path) -> dict[str, Any]:
    xdg = home / "opencode"
    config_dir = xdg / "config" / "opencode"
    # When its first workspace boots, OpenCode 1.18.33 installs @opencode-ai/plugin into its
    # config dir in the background (a lookup of registry.npmjs.org, even with every knob
    # set); this is what its "already installed" check looks for (/tmp/stub-findings.md).
    (config_dir / "node_modules").mkdir(parents=True, exist_ok=True)
    lock = {"packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}
    (config_dir / "package-lock.json").write_text(json.dumps(lock))
    return {
        "model": "stub/stub-model",
        "turn_idle_timeout_s": 60,
        "env": {
            "HOME": str(home),
            **{f"XDG_{kind.upper()}_HOME": str(xdg / kind) for kind in XDG_KINDS},
        },
        # Passed in OPENCODE_CONFIG_CONTENT, over (never into) the user's own config.
        "config": {
            "provider": {
                "stub": {
                    "npm": "@ai-sdk/openai-compatible",  # bundled: nothing is installed
                    "name": "Stub",
                    "options": {"baseURL": stub.openai_base_url, "apiKey": "stub-key"},
                    "models": {"stub-model": {"name": "Stub model", "tool_call": True}},
                }
            },
            "model": "stub/stub-model",
            "small_model": "stub/stub-model",
        },
    }


def acp_gemini(stub: StubLLM, home: Path) -> dict[str, Any]:
    return {
        "turn_idle_timeout_s": 60,
        "env": {
            "HOME": str(home),
            "GOOGLE_GEMINI_BASE_URL": stub.gemini_base_url,  # the "gateway" auth type
            "GEMINI_API_KEY": "stub-key",
            "GEMINI_MODEL": "stub-model",  # not "auto": no model-router call per turn
        },
        # Layered in the settings file the gateway points GEMINI_CLI_SYSTEM_SETTINGS_PATH at.
        "config": {"general": {"maxAttempts": 1}},
    }


def acp_copilot(stub: StubLLM, home: Path) -> dict[str, Any]:
    return {
        # It loads a workspace's hooks whatever it is told, so it runs only where the operator
        # allows that; the suite's workspaces are its own (test_project_config.py shows both).
        "project_config": True,
        "turn_idle_timeout_s": 60,
        "env": {
            "HOME": str(home),
            "COPILOT_PROVIDER_BASE_URL": stub.openai_base_url,  # BYOK: no GitHub login
            "COPILOT_PROVIDER_TYPE": "openai",
            "COPILOT_PROVIDER_API_KEY": "stub-key",
            "COPILOT_MODEL": "stub-model",
            "COPILOT_OFFLINE": "true",
        },
    }


def acp_qwen(stub: StubLLM, home: Path) -> dict[str, Any]:
    return {
        "turn_idle_timeout_s": 60,
        "extra_args": ["--auth-type", "openai"],
        "env": {
            "HOME": str(home),
            "OPENAI_BASE_URL": stub.openai_base_url,
            "OPENAI_API_KEY": "stub-key",
            "OPENAI_MODEL": "stub-model",
        },
        "config": {
            # A memory-extraction model call after each turn.
            "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False},
            "model": {"generationConfig": {"maxRetries": 0}},
        },
    }


def acp_codebuddy(stub: StubLLM, home: Path) -> dict[str, Any]:
    # Custom models live in $HOME/.codebuddy/models.json (OpenAI Chat Completions, full URL).
    models = home / ".codebuddy" / "models.json"
    models.parent.mkdir(parents=True, exist_ok=True)
    model = {
        "id": "stub-model",
        "name": "Stub Model",
        "vendor": "OpenAI",
        "apiKey": "stub-key",
        "maxInputTokens": 128000,
        "maxOutputTokens": 8192,
        "url": f"{stub.openai_base_url}/chat/completions",
        "supportsToolCall": True,
        "supportsImages": False,
    }
    models.write_text(json.dumps({"models": [model], "availableModels": ["stub-model"]}))
    return {
        "turn_idle_timeout_s": 60,
        "env": {
            "HOME": str(home),
            "CODEBUDDY_MODEL": "stub-model",
            "CODEBUDDY_API_KEY": "stub-key",
        },
    }


def acp_claude(stub: StubLLM, home: Path) -> dict[str, Any]:
    """The Claude Agent ACP adapter (its recipe sets the switches that keep Claude Code off
    the network); not in ``CONFIGS``: the contract suite leaves the adapters out."""
    return {
        "turn_idle_timeout_s": 60,
        "env": {
            "ANTHROPIC_BASE_URL": stub.base_url,
            "ANTHROPIC_API_KEY": "stub-key",
            "HOME": str(home),
            "CLAUDE_CODE_MAX_RETRIES": "0",
        },
    }


def acp_codex(stub: StubLLM, home: Path) -> dict[str, Any]:
    """The Codex ACP adapter: its model provider in ``CODEX_CONFIG`` (JSON the adapter layers
    over its Codex's config), so nothing depends on a config.toml the sandbox would not show;
    not in ``CONFIGS``, like the Claude adapter."""
    codex_home = home / "codex-acp"
    codex_home.mkdir(parents=True, exist_ok=True)
    config = {
        "model": "gpt-5.5",
        "model_provider": "stub",
        "check_for_update_on_startup": False,
        "model_providers": {"stub": stub_model_provider(stub)},
        "features": {"plugins": False, "remote_plugin": False, "apps": False},
        "analytics": {"enabled": False},
    }
    return {
        "turn_idle_timeout_s": 60,
        "env": {
            "HOME": str(home),
            "CODEX_HOME": str(codex_home),
            "CODEX_CONFIG": json.dumps(config),
            "STUB_API_KEY": "stub-key",
        },
    }


CONFIGS = {
    "claude_code": claude_code,
    "codex": codex,
    "opencode": opencode,
    "acp:gemini": acp_gemini,
    "acp:copilot": acp_copilot,
    "acp:qwen": acp_qwen,
    "acp:codebuddy": acp_codebuddy,
}
"""The stub wiring of every provider the contract suite runs
(``test_every_provider_has_its_wiring``)."""

ANSWERS_DENIAL = {"claude_code", "codex", "opencode", "acp:gemini"}
"""Providers whose agent gets a denied tool call back as its result and answers it; the ACP
agents Copilot, Qwen Code and CodeBuddy end the turn at a denial instead
(reference/acp-agents.md, "Rejecting a permission can end the turn")."""

ADAPTERS = {"acp:claude", "acp:codex", "acp:opencode"}
"""ACP adapters of CLIs the contract drives natively (Claude Code, Codex, OpenCode): their ACP
mapping is covered on recorded traffic (tests/unit/test_acp_updates.py)."""

"""How the shared ``opencode serve`` is started: argv, environment and config (pure).

The gateway never writes into the user's OpenCode config. Its own requirements travel in
``OPENCODE_CONFIG_CONTENT``, which OpenCode 1.18.33 layers over the user's config files; the
operator's ``providers.opencode.config`` is merged under them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from pydantic import JsonValue

from app.providers.raw import merged

__all__ = [
    "FIXED_ENV",
    "NO_PROJECT_CONFIG_ENV",
    "PASSTHROUGH_ENV",
    "REQUIRED_CONFIG",
    "SERVER_USERNAME",
    "build_argv",
    "model_ref",
    "passthrough_for",
    "server_config",
    "server_env",
]

SERVER_USERNAME = "opencode"
"""Basic-auth user name; OpenCode's default for ``OPENCODE_SERVER_USERNAME``."""

PASSTHROUGH_ENV = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "OPENROUTER_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_GENERATIVE_AI_API_KEY",
    "GROQ_API_KEY",
    "MISTRAL_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "OPENCODE_API_KEY",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_PROFILE",
)
"""Model-provider credentials the CLI may need from the gateway's own environment."""

CREDENTIALS: Mapping[str, tuple[str, ...]] = {
    "anthropic": ("ANTHROPIC_API_KEY",),
    "openai": ("OPENAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "google": ("GEMINI_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY"),
    "groq": ("GROQ_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "opencode": ("OPENCODE_API_KEY",),
    "amazon-bedrock": (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_PROFILE",
    ),
}
"""Which of ``PASSTHROUGH_ENV`` each OpenCode model provider (the ``anthropic`` of
``anthropic/claude-sonnet-4-5``) reads."""


def passthrough_for(model: str | None, config: Mapping[str, JsonValue]) -> tuple[str, ...]:
    """The credentials of ``PASSTHROUGH_ENV`` that the configured OpenCode needs.

    The model providers it is configured for are those of ``providers.opencode.model`` and of
    the config's ``model`` and ``small_model``; each known one brings its credentials, a
    provider the config defines itself (``provider`` entries, with their own keys) none, so a
    credential of another provider (the gateway's AWS keys for an OpenCode on Anthropic) is
    not passed. Configured for none, or for one this table does not know, OpenCode may read
    any of them, and every one is passed.
    """
    named = [model, config.get("model"), config.get("small_model")]
    providers = {m.partition("/")[0] for m in named if isinstance(m, str) and "/" in m}
    custom = config.get("provider")
    defined = set(custom) if isinstance(custom, dict) else set()
    if not providers or any(p not in CREDENTIALS and p not in defined for p in providers):
        return PASSTHROUGH_ENV
    return tuple(name for p in sorted(providers) for name in CREDENTIALS.get(p, ()))


FIXED_ENV: Mapping[str, str] = {
    # Each exists in 1.18.33 (binary strings). These five stop a network call or a download
    # the gateway did not ask for (reference/offline-testing.md).
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    # OPENCODE_DISABLE_EMBEDDED_WEB_UI is deliberately unset: with it, `serve` answers every
    # unknown path by proxying the request to https://app.opencode.ai.
}
"""Always set, over ``providers.opencode.env``."""

NO_PROJECT_CONFIG_ENV: Mapping[str, str] = {
    # A workspace is untrusted input (threat model T7). With this flag 1.18.33 skips the
    # project's opencode.json(c) (permission, mcp, plugin, instructions), every .opencode/
    # between the workspace and its worktree root (opencode.json, plugin/, tool/, agent/,
    # command/), and the project AGENTS.md / CLAUDE.md (observed: without it a project
    # plugin and custom tool load and project MCP servers start when the workspace boots).
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
    # Not covered by the flag above: skills from the workspace's .claude/skills and
    # .agents/skills (and the same directories in HOME). OpenCode's own skill directories
    # in its config dir still load.
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
}
"""Set over ``providers.opencode.env`` unless ``providers.opencode.project_config`` allows the
workspace's own config."""

REQUIRED_CONFIG: Mapping[str, JsonValue] = {"autoupdate": False, "share": "disabled"}
"""Config keys the gateway insists on, whatever the operator's ``config`` says."""


def build_argv(*, executable: str, port: int, extra_args: Sequence[str] = ()) -> list[str]:
    """The command line of the shared server, listening on loopback ``port`` only."""
    return [executable, "serve", "--hostname", "127.0.0.1", "--port", str(port), *extra_args]


def server_config(operator: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """``operator`` config deep-merged under ``REQUIRED_CONFIG`` (the gateway's keys win)."""
    return merged(dict(operator), REQUIRED_CONFIG)


def server_env(
    *,
    overlay: Mapping[str, str],
    config: Mapping[str, JsonValue],
    password: str,
    project_config: bool = False,
) -> dict[str, str]:
    """The variables layered over the allow-listed environment, in order of precedence.

    ``overlay`` (the operator's ``providers.opencode.env``) comes first, so the fixed knobs,
    the config and the password always win. Without ``project_config`` the workspace's own
    config is off (``NO_PROJECT_CONFIG_ENV``); with it OpenCode loads it as it would alone.
    """
    return {
        **overlay,
        **FIXED_ENV,
        **({} if project_config else NO_PROJECT_CONFIG_ENV),
        "OPENCODE_CONFIG_CONTENT": json.dumps(server_config(config), separators=(",", ":")),
        "OPENCODE_SERVER_USERNAME": SERVER_USERNAME,
        "OPENCODE_SERVER_PASSWORD": password,
    }


def model_ref(model: str | None) -> dict[str, str] | None:
    """``provider/model`` as the prompt body's ``{providerID, modelID}``; else ``None``.

    Only the first ``/`` separates: OpenRouter-style ids keep theirs
    (``openrouter/anthropic/claude-sonnet-4-5``). A bare name has no provider, and OpenCode
    cannot resolve it, so the server's configured default model is used instead.
    """
    if not model:
        return None
    provider, _, name = model.partition("/")
    if not provider or not name:
        return None
    return {"providerID": provider, "modelID": name}
